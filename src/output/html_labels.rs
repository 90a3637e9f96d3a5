//! Where the timeline's stage names go: each in the first of up to [`MAX_LANES`] lanes above the
//! plot where it overlaps no other, the widest stages first, never past the chart's edges.

/// Lanes of stage labels above the plot.
pub(super) const MAX_LANES: usize = 5;

/// A label wanted at `x` (its band's start), `w` wide, that may move right up to `until`
/// (where it would leave its band), with a priority (its band's width: long stages first).
#[derive(Debug, Clone, Copy)]
pub(super) struct Wanted {
    pub(super) x: f64,
    pub(super) w: f64,
    pub(super) until: f64,
    pub(super) priority: f64,
}

/// Places labels between `min_x` and `max_x`, the widest bands first: each at its `x`, moved
/// left when it would end past `max_x`, else moved right within its band past the labels in
/// its way, in the first lane where it overlaps no label placed before it. Returns
/// `(left, lane)` per label, `None` when it fits nowhere.
pub(super) fn place_labels(wanted: &[Wanted], min_x: f64, max_x: f64) -> Vec<Option<(f64, usize)>> {
    let mut order: Vec<usize> = (0..wanted.len()).collect();
    // Widest first; bands within half a unit of each other are equal, and go left to right.
    let rank = |i: usize| (wanted[i].priority * 2.0).round();
    order.sort_by(|&a, &b| rank(b).total_cmp(&rank(a)).then(a.cmp(&b)));
    let mut lanes: Vec<Vec<(f64, f64)>> = vec![Vec::new(); MAX_LANES];
    let mut out = vec![None; wanted.len()];
    for i in order {
        let Wanted { x, w, until, .. } = wanted[i];
        let left0 = x.min(max_x - w).max(min_x);
        let last = until.min(max_x - w).max(left0);
        'lanes: for (lane, placed) in lanes.iter_mut().enumerate() {
            // Its own place, then just after each label in its way, as far as its band goes.
            let mut candidates = vec![left0];
            candidates.extend(
                placed
                    .iter()
                    .map(|&(_, b)| b + 2.0)
                    .filter(|&c| c > left0 && c <= last),
            );
            candidates.sort_by(f64::total_cmp);
            for left in candidates {
                let right = left + w;
                if placed.iter().all(|&(a, b)| right <= a || left >= b) {
                    placed.push((left, right));
                    out[i] = Some((left, lane));
                    break 'lanes;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: f64, w: f64) -> Wanted {
        Wanted {
            x,
            w,
            until: x,
            priority: 1.0,
        }
    }

    #[test]
    fn labels_stay_inside_and_apart() {
        // Two that overlap share no lane; one past the right edge is moved left to end there.
        let p = place_labels(
            &[
                at(0.0, 50.0),
                at(5.0, 50.0),
                at(100.0, 20.0),
                at(190.0, 30.0),
            ],
            0.0,
            200.0,
        );
        assert_eq!(
            p,
            [
                Some((0.0, 0)),
                Some((5.0, 1)),
                Some((100.0, 0)),
                Some((170.0, 0))
            ]
        );
        // Moved left onto an earlier one, it takes a free lane.
        let p = place_labels(&[at(150.0, 40.0), at(195.0, 40.0)], 0.0, 200.0);
        assert_eq!(p, [Some((150.0, 0)), Some((160.0, 1))]);
        // More at one place than there are lanes: the rest are not placed...
        let many = vec![at(10.0, 30.0); MAX_LANES + 2];
        let p = place_labels(&many, 0.0, 400.0);
        assert_eq!(p.iter().flatten().count(), MAX_LANES);
        // ... unless their band lets them move right; the widest band is served first.
        let mut crowd = vec![at(10.0, 30.0); MAX_LANES];
        crowd.push(Wanted {
            x: 10.0,
            w: 30.0,
            until: 300.0,
            priority: 290.0,
        });
        let p = place_labels(&crowd, 0.0, 400.0);
        assert_eq!(p[MAX_LANES], Some((10.0, 0)));
        // The short ones cannot move (their bands end where they start): one lane fewer.
        assert_eq!(p[0], Some((10.0, 1)));
        assert_eq!(p[MAX_LANES - 1], None);
        // A label whose band goes on moves past the ones in its way, in the first lane.
        let p = place_labels(
            &[
                at(10.0, 30.0),
                Wanted {
                    x: 20.0,
                    w: 30.0,
                    until: 300.0,
                    priority: 0.5,
                },
            ],
            0.0,
            400.0,
        );
        assert_eq!(p, [Some((10.0, 0)), Some((42.0, 0))]);
    }
}
