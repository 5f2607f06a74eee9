#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| klog_fuzz::codec_lz4(data));
