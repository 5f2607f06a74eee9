#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| klog_fuzz::metadata_record(data));
