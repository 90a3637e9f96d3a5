/*
 * The allocation benchmark against the workspace's fake driver (crates/fakecuda): the very
 * same loop and output as bench_h200.c, only labelled "fake". scripts/bench_fake.sh builds it
 * and runs it with LD_LIBRARY_PATH pointing at a folder where libcuda.so.1 is
 * target/release/libfakecuda.so.
 */
#define BENCH_LABEL "fake"
#include "bench_h200.c"
