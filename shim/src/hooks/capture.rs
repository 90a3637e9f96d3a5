//! Stream capture windows, so that PyTorch's allocations inside a capture are tagged as
//! CUDA-graph private-pool memory, and the thread's capture mode (PyTorch switches to
//! relaxed mode before allocating a private-pool segment).

#![allow(non_snake_case)]

use std::ffi::{c_uint, c_void};

use vramledger_format::{Api, Kind};

use super::forward::forward;
use crate::ffi::*;
use crate::{attribution, devices, guard, recorder};

/// `CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD`: the capture is still open after this.
const WRONG_THREAD: CUresult = 908;
const MODE_GLOBAL: c_uint = 0;

fn begun(api: Api, rc: CUresult, stream: CUstream, mode: c_uint) {
    if rc != CUDA_SUCCESS {
        return;
    }
    attribution::capture_begun();
    guard::record(|| {
        let mut e = recorder::event(Kind::CaptureBegin, api);
        e.handle = stream as u64;
        e.arg0 = mode as u64;
        e.device = devices::current();
        recorder::emit(&e, b"");
    });
}

fn ended(api: Api, rc: CUresult, stream: CUstream) {
    if rc == WRONG_THREAD {
        return;
    }
    attribution::capture_ended();
    guard::record(|| {
        let mut e = recorder::event(Kind::CaptureEnd, api);
        e.result = rc;
        e.handle = stream as u64;
        e.device = devices::current();
        recorder::emit(&e, b"");
    });
}

type BeginFn = unsafe extern "C" fn(CUstream) -> CUresult;
type BeginModeFn = unsafe extern "C" fn(CUstream, c_uint) -> CUresult;
type EndFn = unsafe extern "C" fn(CUstream, *mut CUgraph) -> CUresult;
type ToGraphFn = unsafe extern "C" fn(
    CUstream,
    *mut c_void,
    *const c_void,
    *const c_void,
    usize,
    c_uint,
) -> CUresult;

#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCapture(stream: CUstream) -> CUresult {
    let api = Api::cuStreamBeginCapture;
    let rc = forward!(api, BeginFn, stream);
    begun(api, rc, stream, MODE_GLOBAL);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCapture_ptsz(stream: CUstream) -> CUresult {
    let api = Api::cuStreamBeginCapture_ptsz;
    let rc = forward!(api, BeginFn, stream);
    begun(api, rc, stream, MODE_GLOBAL);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCapture_v2(stream: CUstream, mode: c_uint) -> CUresult {
    let api = Api::cuStreamBeginCapture_v2;
    let rc = forward!(api, BeginModeFn, stream, mode);
    begun(api, rc, stream, mode);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCapture_v2_ptsz(stream: CUstream, mode: c_uint) -> CUresult {
    let api = Api::cuStreamBeginCapture_v2_ptsz;
    let rc = forward!(api, BeginModeFn, stream, mode);
    begun(api, rc, stream, mode);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCaptureToGraph(
    stream: CUstream,
    graph: *mut c_void,
    deps: *const c_void,
    edge_data: *const c_void,
    num_deps: usize,
    mode: c_uint,
) -> CUresult {
    let api = Api::cuStreamBeginCaptureToGraph;
    let rc = forward!(api, ToGraphFn, stream, graph, deps, edge_data, num_deps, mode);
    begun(api, rc, stream, mode);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCaptureToGraph_ptsz(
    stream: CUstream,
    graph: *mut c_void,
    deps: *const c_void,
    edge_data: *const c_void,
    num_deps: usize,
    mode: c_uint,
) -> CUresult {
    let api = Api::cuStreamBeginCaptureToGraph_ptsz;
    let rc = forward!(api, ToGraphFn, stream, graph, deps, edge_data, num_deps, mode);
    begun(api, rc, stream, mode);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamEndCapture(stream: CUstream, graph: *mut CUgraph) -> CUresult {
    let api = Api::cuStreamEndCapture;
    let rc = forward!(api, EndFn, stream, graph);
    ended(api, rc, stream);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamEndCapture_ptsz(
    stream: CUstream,
    graph: *mut CUgraph,
) -> CUresult {
    let api = Api::cuStreamEndCapture_ptsz;
    let rc = forward!(api, EndFn, stream, graph);
    ended(api, rc, stream);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuThreadExchangeStreamCaptureMode(mode: *mut c_uint) -> CUresult {
    crate::note_entry!();
    let api = Api::cuThreadExchangeStreamCaptureMode;
    if crate::real::resolve(api) == 0 {
        return super::forward::missing(api);
    }
    let requested = if mode.is_null() {
        None
    } else {
        // SAFETY: the caller's in/out argument, which the driver is about to read.
        Some(unsafe { *mode })
    };
    let rc = forward!(api, unsafe extern "C" fn(*mut c_uint) -> CUresult, mode);
    if rc == CUDA_SUCCESS {
        if let Some(m) = requested {
            attribution::set_mode(m);
        }
    }
    rc
}
