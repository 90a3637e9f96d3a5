//! Tests of the redaction rules.

use super::*;
#[test]
fn secret_names() {
    for n in [
        "--api-key",
        "--token",
        "--password",
        "--hf-token",
        "--admin-api-key",
        "--ssl-keyfile-password",
        "HF_TOKEN",
        "VLLM_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "OPENAI_APIKEY",
        "db_password",
        "MY_SECRET",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "key",
    ] {
        assert!(is_secret_name(n), "{n}");
    }
    for n in [
        "--max-num-batched-tokens",
        "--tokenizer",
        "--tokenizer-mode",
        "--skip-tokenizer-init",
        "--ssl-keyfile",
        "--model",
        "--mem-fraction-static",
        "PYTORCH_CUDA_ALLOC_CONF",
        "NCCL_IB_HCA",
        "--kv-cache-dtype",
        "--max-total-tokens",
    ] {
        assert!(!is_secret_name(n), "{n}");
    }
}

#[test]
fn command_lines_keep_everything_but_secret_values() {
    let argv = [
        "env",
        "HF_TOKEN=hf_abc",
        "PATH=/usr/bin",
        "python3",
        "-m",
        "sglang.launch_server",
        "--api-key",
        "sk-1",
        "--model",
        "m",
        "--token=t2",
        "--mem-fraction-static",
        "0.8",
        "--password",
        "--port",
        "30000",
        "--hf-token",
    ];
    assert_eq!(
        args(&argv),
        [
            "env",
            "HF_TOKEN=<redacted>",
            "PATH=/usr/bin",
            "python3",
            "-m",
            "sglang.launch_server",
            "--api-key",
            "<redacted>",
            "--model",
            "m",
            "--token=<redacted>",
            "--mem-fraction-static",
            "0.8",
            "--password",
            "--port",
            "30000",
            "--hf-token",
        ]
    );
    let none: [&str; 0] = [];
    assert!(args(&none).is_empty());
    // A value that looks like a flag of one dash is still hidden.
    assert_eq!(args(&["--api-key", "-x"]), ["--api-key", "<redacted>"]);
}

#[test]
fn the_environment_is_an_allow_list() {
    let rec = |n: &str, v: &'static str| env_value(n, v).map(|c| c.into_owned());
    assert_eq!(
        rec("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
        Some("expandable_segments:True".into())
    );
    assert_eq!(rec("CUDA_VISIBLE_DEVICES", "0,1"), Some("0,1".into()));
    assert_eq!(rec("RANK", "3"), Some("3".into()));
    assert_eq!(rec("VLLM_API_KEY", "sk-live"), Some(REDACTED.into()));
    assert_eq!(rec("SGLANG_ADMIN_TOKEN", "x"), Some(REDACTED.into()));
    assert_eq!(rec("VLLM_HOST_IP", "10.0.0.1"), None);
    assert_eq!(rec("SGLANG_STORAGE_URL", "s3://u:p@h/b"), None);
    assert_eq!(rec("HF_TOKEN", "hf_x"), None);
    assert_eq!(rec("AWS_SECRET_ACCESS_KEY", "x"), None);
    assert_eq!(rec("HOME", "/root"), None);
    assert_eq!(rec("CUDA_HOME", "/usr/local/cuda"), None);
    assert_eq!(rec("NCCL_DEBUG", "INFO"), Some("INFO".into()));
    assert_eq!(rec("VLLM_LOGGING_LEVEL", ""), Some("".into()));
    // A listed variable whose value holds a token shape keeps the rest of its value.
    assert_eq!(
        rec("SGLANG_EXTRA", "--token hf_AbCdEfGhIjKlMnOpQrStUvWx"),
        Some("--token <redacted>".into())
    );
}

#[test]
fn settings_lines_lose_their_secrets_and_keep_their_shape() {
    let sglang = "server_args=ServerArgs(model_path='m', api_key='sk-123', admin_api_key=None, mem_fraction_static=0.8, hf_token=abc)";
    assert_eq!(
        text(sglang),
        "server_args=ServerArgs(model_path='m', api_key='<redacted>', admin_api_key=None, mem_fraction_static=0.8, hf_token=<redacted>)"
    );
    let vllm = "non-default args: {'model': 'm', 'api_key': ['k1', 'k2'], \"hf_token\": \"t\", 'max_model_len': 4096}";
    assert_eq!(
        text(vllm),
        "non-default args: {'model': 'm', 'api_key': <redacted>, \"hf_token\": \"<redacted>\", 'max_model_len': 4096}"
    );
    let plain = "Load weight end. avail mem=63.57 GB, mem usage=15.11 GB.";
    assert!(matches!(text(plain), Cow::Borrowed(_)));
    assert_eq!(
        text("max_num_batched_tokens=8192, token_budget=1"),
        "max_num_batched_tokens=8192, token_budget=<redacted>"
    );
    assert_eq!(text("password="), "password=");
    // A line cut inside a quoted secret loses what it has of it.
    assert_eq!(text("x password:'unterminated"), "x password:'<redacted>");
    assert_eq!(
        text("launch: python3 -m sglang --api-key sk-9 --port 1"),
        "launch: python3 -m sglang --api-key <redacted> --port 1"
    );
    assert_eq!(text("--token --port 1"), "--token --port 1");
}

#[test]
fn secret_shapes_anywhere_and_awkward_values() {
    let cases = [
        // URL credentials keep the user, lose the password.
        (
            "model_path='s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/llama', tp_size=2",
            "model_path='s3://AKIAEXAMPLE:<redacted>@bucket/llama', tp_size=2",
        ),
        // A Hugging Face token in a value whose key says nothing.
        (
            "extra='--token hf_AbCdEfGhIjKlMnOpQrStUvWx'",
            "extra='--token <redacted>'",
        ),
        // Escaped quotes inside the secret; a cut line ends inside it.
        (
            "api_key='ab\\'cd', tp_size=1",
            "api_key='<redacted>', tp_size=1",
        ),
        (
            "x=1, hf_token='hf_cut_in_the_mid",
            "x=1, hf_token='<redacted>",
        ),
        // A bare value up to the next separator; an empty string stays empty.
        (
            "auth_token=abc.def, api_key='', secret_key=[1, (2, 3)], n=4",
            "auth_token=<redacted>, api_key='', secret_key=<redacted>, n=4",
        ),
        // Names that merely contain the words.
        (
            "max_total_tokens=9, tokenizer_mode=auto, keyfile=k.pem, num_draft_tokens=4",
            "max_total_tokens=9, tokenizer_mode=auto, keyfile=k.pem, num_draft_tokens=4",
        ),
        // A short hf_ word is a name, not a token.
        ("hf_overrides={}", "hf_overrides={}"),
    ];
    for (input, want) in cases {
        assert_eq!(text(input), want, "{input}");
    }
    // Multi-byte text around secrets survives.
    assert_eq!(text("é api_key='ü' ñ"), "é api_key='<redacted>' ñ");
}

#[test]
fn a_value_or_a_word_that_holds_settings_loses_their_secrets() {
    // Recorded environment values (listed names) that carry settings of their own.
    for (name, value, kept) in [
        (
            "PYTORCH_X",
            r#"{"password": "hunter2", "n": 1}"#,
            r#"{"password": "<redacted>", "n": 1}"#,
        ),
        (
            "VLLM_CONFIG",
            "api_key=s3cret,tp=2",
            "api_key=<redacted>,tp=2",
        ),
        (
            "SGLANG_ARGS",
            "--api-key s3cret --tp 2",
            "--api-key <redacted> --tp 2",
        ),
        (
            "PYTORCH_CUDA_ALLOC_CONF",
            "expandable_segments:True",
            "expandable_segments:True",
        ),
    ] {
        assert_eq!(env_value(name, value).as_deref(), Some(kept), "{name}");
        assert_eq!(env_value_kept(name, value), kept, "{name}");
    }
    // A word of the command line that is a header or a setting.
    let a = args(&[
        "curl",
        "-H",
        "Authorization: Bearer abc123",
        "--data={\"token\": \"t0k\"}",
        "--tp=2",
    ]);
    assert_eq!(
        a,
        [
            "curl",
            "-H",
            "Authorization: <redacted>",
            "--data={\"token\": \"<redacted>\"}",
            "--tp=2"
        ]
    );
}

#[test]
fn a_cut_line_loses_its_last_word_before_it_is_redacted() {
    // The start of a token is too short for its shape: the word is dropped whole.
    assert_eq!(cut_text("mem=1.0 GiB hf_ABCDEFGHIJ"), "mem=1.0 GiB ");
    assert_eq!(
        cut_text("ServerArgs(tp=2, api_key='s3c"),
        "ServerArgs(tp=2, api_key='"
    );
    assert_eq!(cut_text("nosep"), "");
    // Whole lines keep their last word.
    assert_eq!(text("mem=1.0 GiB done"), "mem=1.0 GiB done");
}
