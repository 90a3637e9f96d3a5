//! Streams, stream capture and the capture rule. As in the real driver, while a capture is open
//! "unsafe" calls (cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemCreate, cuMemFree_v2) are refused with
//! STREAM_CAPTURE_UNSUPPORTED, depending on the calling thread's capture mode, and the capture
//! that caused the refusal is invalidated (its cuStreamEndCapture fails with 901).
use std::cell::Cell;
use std::os::raw::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::context::current;
use crate::state::{ffi, with_init, State};
use crate::types::*;

pub struct Stream {
    pub ctx: CUhandle,
}

/// A capture is keyed by stream; the per-thread default stream is one stream per thread.
#[derive(Clone, Copy, Hash, PartialEq, Eq)]
pub struct CaptureKey {
    stream: CUhandle,
    tid: u64,
}

pub struct Capture {
    mode: c_int,
    tid: u64,
    /// The graph given to cuStreamBeginCaptureToGraph, or 0 for a new graph.
    graph: CUhandle,
    invalidated: bool,
}

static NEXT_TID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// cuThreadExchangeStreamCaptureMode's per-thread mode; GLOBAL is the default.
    static MODE: Cell<c_int> = const { Cell::new(CU_STREAM_CAPTURE_MODE_GLOBAL) };
    static TID: u64 = NEXT_TID.fetch_add(1, Ordering::Relaxed);
}

fn tid() -> u64 {
    TID.with(|t| *t)
}

/// Refuse an unsafe call while a capture forbids it, and invalidate that capture:
/// - RELAXED threads may do anything;
/// - a capture on this thread that was not begun RELAXED forbids it (THREAD_LOCAL and GLOBAL);
/// - a GLOBAL thread is also stopped by any GLOBAL capture on another thread.
pub fn check_capture_rule(st: &mut State) -> Result<(), CUresult> {
    let mode = MODE.with(|m| m.get());
    if mode == CU_STREAM_CAPTURE_MODE_RELAXED {
        return Ok(());
    }
    let me = tid();
    let mut refused = false;
    for c in st.captures.values_mut() {
        let own = c.tid == me && c.mode != CU_STREAM_CAPTURE_MODE_RELAXED;
        let global =
            mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c.mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
        if own || global {
            c.invalidated = true;
            refused = true;
        }
    }
    if refused {
        Err(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    } else {
        Ok(())
    }
}

/// The device a stream's work runs on; the special streams use the current context.
pub fn stream_device(st: &State, stream: CUhandle) -> Result<usize, CUresult> {
    if stream <= CU_STREAM_PER_THREAD {
        return Ok(current(st)?.1);
    }
    let s = st.streams.get(&stream).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
    match st.contexts.get(&s.ctx) {
        Some(c) if c.active => Ok(c.dev),
        _ => Err(CUDA_ERROR_INVALID_CONTEXT),
    }
}

/// `Ok(None)` for the legacy stream, which cannot be captured.
fn key(st: &State, stream: CUhandle, ptsz: bool) -> Result<Option<CaptureKey>, CUresult> {
    let stream = if stream == 0 && ptsz {
        CU_STREAM_PER_THREAD
    } else {
        stream
    };
    match stream {
        0 | CU_STREAM_LEGACY => Ok(None),
        CU_STREAM_PER_THREAD => Ok(Some(CaptureKey { stream, tid: tid() })),
        s if st.streams.contains_key(&s) => Ok(Some(CaptureKey { stream: s, tid: 0 })),
        _ => Err(CUDA_ERROR_INVALID_HANDLE),
    }
}

pub fn release_context_streams(st: &mut State, ctx: CUhandle) {
    let dead: Vec<_> = st
        .streams
        .iter()
        .filter(|(_, s)| s.ctx == ctx)
        .map(|(&h, _)| h)
        .collect();
    for h in dead {
        st.streams.remove(&h);
        st.captures.retain(|k, _| k.stream != h);
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(ph: *mut CUhandle, _flags: c_uint) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(ph)?;
            let (ctx, _) = current(st)?;
            let h = st.token(0x57);
            st.streams.insert(h, Stream { ctx });
            *o = h;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(stream: CUhandle) -> CUresult {
    ffi(|| {
        with_init(|st| {
            st.streams
                .remove(&stream)
                .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
            st.captures.retain(|k, _| k.stream != stream);
            Ok(())
        })
    })
}

fn begin(stream: CUhandle, mode: c_int, ptsz: bool, graph: CUhandle) -> CUresult {
    ffi(|| {
        with_init(|st| {
            if !(0..=2).contains(&mode) {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let k = key(st, stream, ptsz)?.ok_or(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)?;
            if st.captures.contains_key(&k) {
                return Err(CUDA_ERROR_ILLEGAL_STATE);
            }
            st.captures.insert(
                k,
                Capture {
                    mode,
                    tid: tid(),
                    graph,
                    invalidated: false,
                },
            );
            Ok(())
        })
    })
}

fn end(stream: CUhandle, pgraph: *mut CUhandle, ptsz: bool) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = unsafe { out(pgraph)? };
            let k = key(st, stream, ptsz)?.ok_or(CUDA_ERROR_ILLEGAL_STATE)?;
            let c = st.captures.remove(&k).ok_or(CUDA_ERROR_ILLEGAL_STATE)?;
            if c.mode != CU_STREAM_CAPTURE_MODE_RELAXED && c.tid != tid() {
                st.captures.insert(k, c);
                return Err(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
            }
            if c.invalidated {
                *o = 0;
                return Err(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
            }
            let g = if c.graph != 0 {
                c.graph
            } else {
                st.token(0x6A)
            };
            st.graphs.insert(g);
            *o = g;
            Ok(())
        })
    })
}

/// The pre-10.1 ABI: no mode argument, GLOBAL.
#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCapture(stream: CUhandle) -> CUresult {
    begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL, false, 0)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCapture_ptsz(stream: CUhandle) -> CUresult {
    begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL, true, 0)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCapture_v2(stream: CUhandle, mode: c_int) -> CUresult {
    begin(stream, mode, false, 0)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCapture_v2_ptsz(stream: CUhandle, mode: c_int) -> CUresult {
    begin(stream, mode, true, 0)
}

/// (hStream, hGraph, dependencies, dependencyData, numDependencies, mode); the fake records no
/// graph nodes, so the dependencies are ignored.
#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCaptureToGraph(
    stream: CUhandle,
    graph: CUhandle,
    _deps: *const c_void,
    _dep_data: *const c_void,
    _num_deps: usize,
    mode: c_int,
) -> CUresult {
    if graph == 0 {
        return CUDA_ERROR_INVALID_VALUE;
    }
    begin(stream, mode, false, graph)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCaptureToGraph_ptsz(
    stream: CUhandle,
    graph: CUhandle,
    _deps: *const c_void,
    _dep_data: *const c_void,
    _num_deps: usize,
    mode: c_int,
) -> CUresult {
    if graph == 0 {
        return CUDA_ERROR_INVALID_VALUE;
    }
    begin(stream, mode, true, graph)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamEndCapture(stream: CUhandle, graph: *mut CUhandle) -> CUresult {
    end(stream, graph, false)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamEndCapture_ptsz(
    stream: CUhandle,
    graph: *mut CUhandle,
) -> CUresult {
    end(stream, graph, true)
}

/// CUstreamCaptureStatus: NONE 0, ACTIVE 1, INVALIDATED 2.
fn is_capturing(stream: CUhandle, status: *mut c_int, ptsz: bool) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = unsafe { out(status)? };
            *o = match key(st, stream, ptsz)?.and_then(|k| st.captures.get(&k)) {
                None => 0,
                Some(c) if c.invalidated => 2,
                Some(_) => 1,
            };
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamIsCapturing(stream: CUhandle, status: *mut c_int) -> CUresult {
    is_capturing(stream, status, false)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamIsCapturing_ptsz(
    stream: CUhandle,
    status: *mut c_int,
) -> CUresult {
    is_capturing(stream, status, true)
}

#[no_mangle]
pub unsafe extern "C" fn cuThreadExchangeStreamCaptureMode(mode: *mut c_int) -> CUresult {
    ffi(|| {
        with_init(|_| Ok(()))?;
        let m = out(mode)?;
        if !(0..=2).contains(m) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        *m = MODE.with(|cur| cur.replace(*m));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuGraphDestroy(graph: CUhandle) -> CUresult {
    ffi(|| {
        with_init(|st| {
            if st.graphs.remove(&graph) {
                Ok(())
            } else {
                Err(CUDA_ERROR_INVALID_VALUE)
            }
        })
    })
}

/// CUgraphMem_attribute 0..=3 (USED/RESERVED, CURRENT/HIGH): the fake has no graph memory nodes,
/// so every value is 0.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetGraphMemAttribute(
    device: CUdevice,
    attr: c_int,
    value: *mut u64,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(value)?;
            st.device(device)?;
            if !(0..=3).contains(&attr) {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            *o = 0;
            Ok(())
        })
    })
}
