//! The header record: facts about the process, as ordered key/value pairs.
//!
//! Keys written by the shim: `pid`, `ppid`, `run_id`, `host`, `cmdline` (arguments
//! joined by NUL, secret values replaced by `<redacted>`), `start_unix_ns`, `start_mono_ns`
//! (no record of the journal is stamped earlier), `exe`, `cuda_visible_devices`,
//! `driver_version`, `shim_version`, `env.<NAME>` for the allow-list of settings that change
//! allocation (docs/journal.md, "Secrets"), and `lib.<name>` for CUDA libraries loaded at the
//! time (value: resolved path).

/// The `run_id` the shim records when `VRAMLEDGER_RUN_ID` is not set (a process started by
/// hand, not under `vramledger run`): it names no run, so readers that group journals into runs
/// (`vramledger export`) treat it as no run id.
pub const NO_RUN_ID: &str = "adhoc";

/// Ordered key/value pairs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// The pairs, in the order written.
    pub pairs: Vec<(String, String)>,
}

impl Header {
    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Adds a pair.
    pub fn push(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.pairs.push((key.into(), value.into()));
    }

    /// Payload bytes: per pair `u16 key length, key, u32 value length, value`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, v) in &self.pairs {
            let k = &k.as_bytes()[..k.len().min(u16::MAX as usize)];
            let v = &v.as_bytes()[..v.len().min(16 * 1024)];
            out.extend_from_slice(&(k.len() as u16).to_le_bytes());
            out.extend_from_slice(k);
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
        out
    }

    /// Decodes a payload; `None` if the pairs do not add up to its length.
    pub fn decode(payload: &[u8]) -> Option<Header> {
        let mut pairs = Vec::new();
        let mut at = 0usize;
        while at < payload.len() {
            let kl = u16::from_le_bytes(payload.get(at..at + 2)?.try_into().ok()?) as usize;
            at += 2;
            let k = payload.get(at..at + kl)?;
            at += kl;
            let vl = u32::from_le_bytes(payload.get(at..at + 4)?.try_into().ok()?) as usize;
            at += 4;
            let v = payload.get(at..at + vl)?;
            at += vl;
            pairs.push((
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
        }
        Some(Header { pairs })
    }
}

#[cfg(test)]
mod tests {
    use super::Header;

    #[test]
    fn round_trip_and_corruption() {
        let mut h = Header::default();
        h.push("pid", "42");
        h.push("cmdline", "python\0-m\0sglang.launch_server");
        h.push("empty", "");
        let p = h.encode();
        let back = Header::decode(&p).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.get("pid"), Some("42"));
        assert_eq!(Header::decode(&p[..p.len() - 1]), None);
    }
}
