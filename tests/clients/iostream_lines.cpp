// iostream_lines [sync|unsync] [long]: SGLang's startup lines through std::cout and std::cerr,
// with the standard streams synchronised with stdio (the default: libstdc++ writes through
// fwrite/putc) or not (sync_with_stdio(false): its own buffer, flushed with write/writev).
// "long" pads the weight-loading line past 1 KiB (libstdc++ writes such a piece with writev).
#include <cstring>
#include <iostream>
#include <string>

int main(int argc, char **argv) {
    bool unsync = argc > 1 && !std::strcmp(argv[1], "unsync");
    bool longer = argc > 2 && !std::strcmp(argv[2], "long");
    if (unsync) std::ios::sync_with_stdio(false);
    const char *stamp = "[2025-06-01 10:00:00 TP0] ";
    std::cerr << stamp << "Init torch distributed begin." << std::endl;
    std::cout << stamp << "Init torch distributed ends. mem usage=" << 0.58 << " GB" << std::endl;
    std::cout << stamp << "Load weight begin. avail mem=" << 78.68 << " GB" << std::endl;
    std::string end = std::string(stamp) + "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16";
    if (longer) end += ", note=" + std::string(1500, 'x');
    std::cout << end << ", avail mem=63.57 GB, mem usage=15.11 GB." << '\n' << std::flush;
    std::cout << stamp << "KV Cache is allocated. #tokens: 444500, K size: 27.13 GB, V size: 27.13 GB" << std::endl;
    std::cout << stamp << "Memory pool end. avail mem=" << 8.40 << " GB" << std::endl;
    std::cout << stamp << "Capture cuda graph begin. This can take up to several minutes. avail mem=7.88 GB"
              << std::endl;
    std::cerr << stamp << "Capture cuda graph end. Time elapsed: 15.21 s. mem usage=0.60 GB. avail mem=7.28 GB."
              << std::endl;
    std::cout << stamp
              << "max_total_num_tokens=444500, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                 "max_running_requests=4096, context_len=131072, available_gpu_mem=7.28 GB"
              << std::endl;
    return 0;
}
