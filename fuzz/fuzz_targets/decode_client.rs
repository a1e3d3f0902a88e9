//! Fuzzes `decode_client_frame`: any input is refused with a typed error or decoded, never a
//! panic, and a decoded frame encodes to text that decodes again to the same frame type and id.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tether_protocol::{DEFAULT_MAX_FRAME_BYTES, decode_client_frame, encode_frame};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match decode_client_frame(&text, DEFAULT_MAX_FRAME_BYTES) {
        Ok(frame) => {
            let encoded = encode_frame(&frame);
            let again = decode_client_frame(&encoded, usize::MAX).expect("an encoded frame decodes again");
            assert_eq!(again.type_name(), frame.type_name());
            assert_eq!(again.id(), frame.id());
        }
        Err(error) => {
            // Every refusal maps to a typed code and a readable message.
            let _ = (error.code(), error.frame_id(), error.to_string());
        }
    }
    // The size limit holds whatever the content: nothing over it is parsed.
    if text.len() > 64 {
        assert!(decode_client_frame(&text, 64).is_err());
    }
});
