//! Untrusted bytes through the HTTP/1.x head parsers and the path resolver of
//! `ironpath-http`. Input: byte 0 seeds the piece sizes for `HeadBuf`; the rest is the
//! byte stream a peer sent.
//!
//! Checked: no panic; `parse_request` and `parse_response_head` (head limits 0, 64, 256
//! and 8192) report `Incomplete` only below the limit and a `consumed` within the buffer
//! and the limit; a parsed target is visible ASCII; `HeadBuf` fed the stream in pieces
//! yields the same requests (and the same final outcome) as one-shot parses one after
//! another; `resolve_path` of the stream as text and of every parsed target stays under
//! the root, with only plain components after it.
#![no_main]
use std::path::{Component, Path};

use ironpath_http::{parse_request, parse_response_head, resolve_path, HeadBuf, Parse, RespParse, Status};
use libfuzzer_sys::fuzz_target;

const MAX_HEADS: [usize; 4] = [0, 64, 256, 8192];

fn check_resolve(target: &str) {
    for root in [Path::new("/srv/www"), Path::new("www")] {
        if let Ok(path) = resolve_path(root, target) {
            let under = path.strip_prefix(root).expect("resolved path left the root");
            assert!(under.components().all(|c| matches!(c, Component::Normal(_))), "{target:?} -> {path:?}");
        }
    }
}

/// One-shot parses one request after another (skipping bodies), until one is not `Done`.
fn one_shot(stream: &[u8], max_head: usize) -> Vec<Parse> {
    let mut outcomes = Vec::new();
    let mut at = 0;
    loop {
        let rest = &stream[at..];
        let parse = parse_request(rest, max_head);
        let Parse::Done { req, consumed } = &parse else {
            if parse == Parse::Incomplete {
                assert!(rest.len() < max_head, "Incomplete at the head limit");
            }
            outcomes.push(parse);
            return outcomes;
        };
        assert!(*consumed > 0 && *consumed <= rest.len().min(max_head), "consumed {consumed} of {}", rest.len());
        assert!(req.path.bytes().all(|b| b.is_ascii_graphic()));
        check_resolve(&req.path);
        at = (at + consumed).saturating_add(req.content_length).min(stream.len());
        outcomes.push(parse);
    }
}

/// The same stream through a `HeadBuf` in pieces of pseudo-random sizes.
fn in_pieces(stream: &[u8], max_head: usize, mut seed: u8) -> Vec<Parse> {
    let mut heads = HeadBuf::new(max_head);
    let mut outcomes = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        seed = seed.wrapping_mul(37).wrapping_add(11);
        let (mut piece, tail) = rest.split_at(usize::from(seed % 17 + 1).min(rest.len()));
        rest = tail;
        while !piece.is_empty() {
            let taken = heads.push(piece);
            piece = &piece[taken..];
            loop {
                match heads.next_request() {
                    Parse::Incomplete => break,
                    done @ Parse::Done { .. } => outcomes.push(done),
                    error @ Parse::Error(_) => {
                        outcomes.push(error);
                        return outcomes;
                    }
                }
            }
            assert!(taken > 0 || piece.is_empty(), "HeadBuf took nothing and parsed nothing");
        }
    }
    outcomes.push(Parse::Incomplete);
    outcomes
}

fuzz_target!(|input: &[u8]| {
    let Some((&seed, stream)) = input.split_first() else { return };
    for max_head in MAX_HEADS {
        let outcomes = one_shot(stream, max_head);
        if let Some(Parse::Error(status)) = outcomes.last() {
            assert!([400, 414, 431, 501, 505].contains(&status.0), "unexpected {status}");
            if [Status::URI_TOO_LONG, Status::HEADER_FIELDS_TOO_LARGE].contains(status) {
                assert!(max_head <= stream.len(), "head limit error below the limit");
            }
        }
        if max_head > 0 {
            assert_eq!(in_pieces(stream, max_head, seed), outcomes, "HeadBuf disagrees at max_head {max_head}");
        }
        match parse_response_head(stream, max_head) {
            RespParse::Incomplete => assert!(stream.len() < max_head),
            RespParse::Done { consumed, status, .. } => {
                assert!(consumed > 0 && consumed <= stream.len().min(max_head));
                assert!((100..=999).contains(&status));
            }
            RespParse::Error(_) => {}
        }
    }
    check_resolve(&String::from_utf8_lossy(stream));
});
