pub use vramledger_format as format;
