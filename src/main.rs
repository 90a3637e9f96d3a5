fn main() {
    std::process::exit(vramledger::cli::main());
}
