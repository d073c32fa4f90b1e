//! Writing messages: compact JSON followed by `\n` (D1, D12).

use super::{Request, Response};

impl Request {
    /// The request as compact JSON plus `\n`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }

    /// Appends the request, compact JSON plus `\n`, to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let _ = out;
        todo!("issue 2: serialize")
    }
}

impl Response {
    /// The response as compact JSON plus `\n`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }

    /// Appends the response, compact JSON plus `\n`, to `out`. Writes
    /// whatever headers are set: the connection fills in `date` and
    /// `language` before it gets here.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let _ = out;
        todo!("issue 2: serialize")
    }
}
