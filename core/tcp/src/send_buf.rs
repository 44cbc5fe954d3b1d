//! The send buffer: the application's payloads, kept by reference until acknowledged.
use std::collections::VecDeque;

use crate::Payload;

/// Queued and unacknowledged data, from `snd_una` on, as the payloads `send` received
/// (the front one trimmed as ACKs arrive). Segments are slices of them.
#[derive(Debug, Clone)]
pub(crate) struct SendBuffer<P> {
    chunks: VecDeque<P>,
    len: usize,
    limit: usize,
    /// Where the last slice started: (chunk index, offset of that chunk's first byte),
    /// so that sending a window of segments does not rescan from the front each time.
    cursor: (usize, usize),
}

impl<P: Payload> SendBuffer<P> {
    pub(crate) fn new(limit: usize) -> Self {
        SendBuffer { chunks: VecDeque::new(), len: 0, limit, cursor: (0, 0) }
    }

    /// Bytes held (unsent and unacknowledged).
    /// Gives the queue's memory back once nothing is queued.
    pub(crate) fn release(&mut self) {
        if self.chunks.is_empty() {
            self.chunks = VecDeque::new();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes `push` would accept.
    pub(crate) fn free(&self) -> usize {
        self.limit.saturating_sub(self.len)
    }

    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Queues as much of `data` as fits; returns how many bytes.
    pub(crate) fn push(&mut self, data: P) -> usize {
        let n = data.len().min(self.free());
        if n == 0 {
            return 0;
        }
        self.chunks.push_back(if n < data.len() { data.slice(0, n) } else { data });
        self.len += n;
        n
    }

    /// Drops `n` acknowledged bytes from the front.
    pub(crate) fn consume(&mut self, n: usize) {
        let mut n = n.min(self.len);
        self.len -= n;
        let removed = n;
        let mut popped = 0;
        while n > 0 {
            let Some(front) = self.chunks.front_mut() else { break };
            let front_len = front.len();
            if front_len <= n {
                self.chunks.pop_front();
                popped += 1;
                n -= front_len;
            } else {
                *front = front.slice(n, front_len - n);
                n = 0;
            }
        }
        let (idx, start) = self.cursor;
        self.cursor = if idx > popped { (idx - popped, start - removed) } else { (0, 0) };
    }

    /// `len > 0` bytes from `off` (`off + len <= self.len()`), as one payload.
    pub(crate) fn slice(&mut self, off: usize, len: usize) -> Option<P> {
        if len == 0 || off + len > self.len {
            return None;
        }
        let (mut idx, mut start) = self.cursor;
        if off < start || idx >= self.chunks.len() {
            (idx, start) = (0, 0);
        }
        while start + self.chunks[idx].len() <= off {
            start += self.chunks[idx].len();
            idx += 1;
        }
        self.cursor = (idx, start);
        let mut out: Option<P> = None;
        let (mut pos, mut want) = (off, len);
        while want > 0 {
            let chunk = &self.chunks[idx];
            let within = pos - start;
            let take = (chunk.len() - within).min(want);
            let piece = if within == 0 && take == chunk.len() { chunk.clone() } else { chunk.slice(within, take) };
            match out.as_mut() {
                None => out = Some(piece),
                Some(out) => out.append(piece),
            }
            want -= take;
            pos += take;
            start += chunk.len();
            idx += 1;
        }
        out
    }

    /// Drops everything (reset or abort).
    pub(crate) fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
        self.cursor = (0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Bytes, XorShift};

    #[test]
    fn slices_cross_chunks_and_follow_acks() {
        let mut rng = XorShift(99);
        for _ in 0..200 {
            let limit = 1 + rng.below(5000) as usize;
            let mut buf = SendBuffer::<Bytes>::new(limit);
            let mut model: Vec<u8> = Vec::new();
            for _ in 0..50 {
                match rng.below(3) {
                    0 => {
                        let n = rng.below(700) as usize;
                        let data = rng.bytes(n);
                        let n = buf.push(Bytes::from(data.clone()));
                        assert_eq!(n, data.len().min(limit - model.len()));
                        model.extend_from_slice(&data[..n]);
                    }
                    1 => {
                        let n = rng.below(model.len() as u64 + 1) as usize;
                        buf.consume(n);
                        model.drain(..n);
                    }
                    _ => {
                        // Sequential slices, like a window of segments, then a random one.
                        let mss = 1 + rng.below(600) as usize;
                        let mut off = rng.below(model.len() as u64 + 1) as usize;
                        while off < model.len() {
                            let len = mss.min(model.len() - off);
                            assert_eq!(buf.slice(off, len).unwrap().to_vec(), model[off..off + len]);
                            off += len;
                        }
                    }
                }
                assert_eq!(buf.len(), model.len());
                assert_eq!(buf.free(), limit - model.len());
            }
        }
    }

    #[test]
    fn edge_cases() {
        let mut buf = SendBuffer::<Bytes>::new(10);
        assert_eq!(buf.push(Bytes::from(vec![1u8; 4])), 4);
        assert_eq!(buf.push(Bytes::from(vec![2u8; 10])), 6, "trimmed to the limit");
        assert_eq!(buf.push(Bytes::from(vec![3u8; 1])), 0);
        assert!(buf.slice(0, 0).is_none());
        assert!(buf.slice(5, 6).is_none());
        assert_eq!(buf.slice(2, 4).unwrap().to_vec(), [1, 1, 2, 2]);
        buf.consume(100);
        assert_eq!((buf.len(), buf.limit()), (0, 10));
        buf.push(Bytes::from(vec![5u8; 3]));
        buf.clear();
        assert_eq!(buf.len(), 0);
    }
}
