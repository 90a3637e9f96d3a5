//! The model's `config.json`: `--model-config`, else the one in the model folder the engine
//! logged — the folder itself, or, for a hub id (`org/name`), its snapshot in the Hugging Face
//! cache (`HF_HUB_CACHE`, `HF_HOME/hub`, `XDG_CACHE_HOME/huggingface/hub`,
//! `~/.cache/huggingface/hub`; the `refs/main` snapshot first, then the others, newest first) —
//! else one in the run folder.

use std::path::{Path, PathBuf};

use super::inputs::Origin;
use super::report::ModelSource;
use super::request::SizeRequest;

fn read_model(path: &Path, origin: Origin, detail: String) -> Result<ModelSource, String> {
    // A regular file of bounded size, every sizing field bounded (src/sizing/model_config.rs).
    let geometry = crate::sizing::model_config::read(path)?;
    Ok(ModelSource {
        geometry,
        path: path.display().to_string(),
        origin,
        detail,
    })
}

/// `--model-config`; else the `config.json` of the model folder the engine logged (the path
/// the run recorded, else the `model_path` setting; a hub id is looked up in the Hugging Face
/// cache); else a `config.json` in the run folder. A candidate that is there but unreadable is
/// skipped with a warning.
pub fn find_model(
    args: &SizeRequest,
    recorded: Option<(String, String)>,
    model_path: Option<&str>,
) -> Result<Option<ModelSource>, String> {
    if let Some(p) = &args.model_config {
        return read_model(p, Origin::Given, "--model-config".into()).map(Some);
    }
    let mut candidates: Vec<(PathBuf, Origin, String)> = Vec::new();
    let logged = recorded
        .into_iter()
        .chain(model_path.map(|m| (m.to_string(), "the logged model_path setting".to_string())));
    for (m, whose) in logged {
        for c in config_candidates(&m) {
            let how = format!("config.json of the logged model folder {m} ({whose})");
            candidates.push((c, Origin::Derived, how));
        }
    }
    if let Some(run) = args.run.as_ref().filter(|r| r.is_dir()) {
        candidates.push((
            run.join("config.json"),
            Origin::Derived,
            "config.json in the run folder".to_string(),
        ));
    }
    for (c, origin, detail) in candidates {
        if !c.is_file() {
            continue;
        }
        match read_model(&c, origin, detail) {
            Ok(m) => return Ok(Some(m)),
            Err(e) => {
                crate::stderr::line("vramledger size", format_args!("warning: {e}; not used"))
            }
        }
    }
    Ok(None)
}

/// Candidate `config.json` paths for `model` (in the order to try; none need exist).
pub fn config_candidates(model: &str) -> Vec<PathBuf> {
    let mut out = vec![Path::new(model).join("config.json")];
    if let Some((org, name)) = hub_id(model) {
        for hub in hub_caches() {
            out.extend(snapshot_configs(
                &hub.join(format!("models--{org}--{name}")),
            ));
        }
    }
    out
}

/// `org/name` of a Hugging Face hub id (not a path: no leading `/`, `.` or `~`, one `/`).
fn hub_id(model: &str) -> Option<(&str, &str)> {
    if model.starts_with(['/', '.', '~']) {
        return None;
    }
    let (org, name) = model.trim_end_matches('/').split_once('/')?;
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    (ok(org) && ok(name)).then_some((org, name))
}

fn hub_caches() -> Vec<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let mut out = Vec::new();
    out.extend(var("HF_HUB_CACHE"));
    out.extend(var("HUGGINGFACE_HUB_CACHE"));
    out.extend(var("HF_HOME").map(|h| h.join("hub")));
    out.extend(var("XDG_CACHE_HOME").map(|c| c.join("huggingface/hub")));
    out.extend(var("HOME").map(|h| h.join(".cache/huggingface/hub")));
    out.dedup();
    out
}

fn snapshot_configs(repo: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rev) = std::fs::read_to_string(repo.join("refs/main")) {
        let rev = rev.trim();
        if !rev.is_empty() && !rev.contains(['/', '.']) {
            out.push(repo.join("snapshots").join(rev).join("config.json"));
        }
    }
    let Ok(entries) = std::fs::read_dir(repo.join("snapshots")) else {
        return out;
    };
    let mut snaps: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let t = e.metadata().and_then(|m| m.modified()).ok()?;
            Some((t, e.path().join("config.json")))
        })
        .collect();
    snaps.sort_by_key(|s| std::cmp::Reverse(s.0));
    for (_, p) in snaps {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_ids_and_paths() {
        assert_eq!(hub_id("Qwen/Qwen2.5-0.5B"), Some(("Qwen", "Qwen2.5-0.5B")));
        assert_eq!(
            hub_id("meta-llama/Llama-3.1-8B/"),
            Some(("meta-llama", "Llama-3.1-8B"))
        );
        for not in ["/models/x", "./x/y", "a/b/c", "model", "~/m/x", "a b/c"] {
            assert_eq!(hub_id(not), None, "{not}");
        }
        assert_eq!(
            config_candidates("/m/x")[0],
            PathBuf::from("/m/x/config.json")
        );
    }

    #[test]
    fn the_cached_snapshot_of_a_hub_id() {
        let dir = std::env::temp_dir().join(format!("vl-hub-{}", std::process::id()));
        let repo = dir.join("models--org--name");
        std::fs::create_dir_all(repo.join("snapshots/abc123")).unwrap();
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "abc123\n").unwrap();
        let got = snapshot_configs(&repo);
        assert_eq!(got[0], repo.join("snapshots/abc123/config.json"));
        assert_eq!(got.len(), 1, "{got:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
