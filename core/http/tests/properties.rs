//! Property tests over pseudo-random inputs (ironpath-util's seeded xorshift, so failures repeat):
//! the parsers never panic and keep their promises about `consumed` and the head limit,
//! `HeadBuf` fed in random pieces agrees with a one-shot parse, and `resolve_path` never
//! leaves the root.

use std::path::{Component, Path};

use ironpath_http::{parse_request, parse_response_head, resolve_path, HeadBuf, Parse, RespParse, Status};
use ironpath_util::testing::XorShift;

const SEEDS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
    b"HEAD /a/b.txt?x=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /n HTTP/1.1\r\nHost: h\r\n\r\n",
    b"GET /x HTTP/1.1\nHost: h\nConnection: close, upgrade\n\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
];

/// Bytes that matter to the grammar, to splice into seeds.
const SPICE: &[&[u8]] =
    &[b"\r", b"\n", b"\r\n", b"\r\n\r\n", b"\n\n", b" ", b"\t", b":", b",", b"\0", b"\x7f", b"\xff", b"%", b"HTTP/1.1"];

fn random_bytes(rng: &mut XorShift) -> Vec<u8> {
    let len = rng.index(300);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// A seed with a few bytes flipped, removed or spliced in.
fn mutated(rng: &mut XorShift) -> Vec<u8> {
    let mut bytes = rng.pick(SEEDS).to_vec();
    mutate(rng, &mut bytes);
    bytes
}

fn mutate(rng: &mut XorShift, bytes: &mut Vec<u8>) {
    for _ in 0..=rng.index(4) {
        let at = rng.index(bytes.len() + 1);
        match rng.index(4) {
            0 if at < bytes.len() => bytes[at] = rng.next_u64() as u8,
            1 if at < bytes.len() => {
                bytes.remove(at);
            }
            2 => {
                let spice = rng.pick(SPICE);
                bytes.splice(at..at, spice.iter().copied());
            }
            _ => bytes.truncate(at),
        }
    }
}

/// Pipelined requests (the request seeds), now and then one of them mutated.
fn pipeline(rng: &mut XorShift) -> Vec<u8> {
    let mut stream = Vec::new();
    for _ in 0..=rng.index(4) {
        let mut request = rng.pick(&SEEDS[..4]).to_vec();
        if rng.index(4) == 0 {
            mutate(rng, &mut request);
        }
        stream.extend_from_slice(&request);
    }
    stream
}

fn input(rng: &mut XorShift) -> Vec<u8> {
    if rng.index(2) == 0 {
        random_bytes(rng)
    } else {
        mutated(rng)
    }
}

const MAX_HEADS: &[usize] = &[0, 1, 16, 40, 64, 8192];

fn check_request(buf: &[u8], max_head: usize) -> Parse {
    let parse = parse_request(buf, max_head);
    match &parse {
        Parse::Incomplete => assert!(buf.len() < max_head, "Incomplete with {} of {max_head} bytes", buf.len()),
        Parse::Done { req, consumed } => {
            assert!(*consumed > 0 && *consumed <= buf.len().min(max_head), "consumed {consumed}");
            assert!(req.path.bytes().all(|b| b.is_ascii_graphic()), "{:?}", req.path);
            assert!(req.minor <= 1);
        }
        Parse::Error(status) => {
            if [Status::URI_TOO_LONG, Status::HEADER_FIELDS_TOO_LARGE].contains(status) {
                assert!(buf.len() >= max_head);
            } else {
                assert!([400, 501, 505].contains(&status.0), "{status}");
            }
        }
    }
    parse
}

#[test]
fn parsers_never_panic_and_keep_their_limits() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut done = 0;
    for _ in 0..20_000 {
        let buf = input(&mut rng);
        for &max_head in MAX_HEADS {
            done += usize::from(matches!(check_request(&buf, max_head), Parse::Done { .. }));
            match parse_response_head(&buf, max_head) {
                RespParse::Incomplete => assert!(buf.len() < max_head),
                RespParse::Done { consumed, status, .. } => {
                    assert!(consumed > 0 && consumed <= buf.len().min(max_head));
                    assert!((100..=999).contains(&status));
                }
                RespParse::Error(_) => {}
            }
        }
    }
    // The mutations must leave enough requests valid to exercise the Done path.
    assert!(done > 1000, "only {done} requests parsed");
}

#[test]
fn headbuf_in_random_pieces_agrees_with_one_shot_parse() {
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let mut pipelined = 0;
    for _ in 0..10_000 {
        let stream = if rng.index(2) == 0 { input(&mut rng) } else { pipeline(&mut rng) };
        let max_head = *rng.pick(&[16, 40, 64, 8192]);
        // Expected: parse requests one after another from the whole stream.
        let mut expected = Vec::new();
        let mut at = 0;
        loop {
            let parse = parse_request(&stream[at..], max_head);
            match &parse {
                Parse::Done { req, consumed } => at = (at + consumed + req.content_length).min(stream.len()),
                Parse::Incomplete | Parse::Error(_) => {
                    expected.push(parse);
                    break;
                }
            }
            expected.push(parse);
        }
        // Actual: the same stream in random pieces.
        let mut heads = HeadBuf::new(max_head);
        let mut got = Vec::new();
        let mut rest = &stream[..];
        let mut last = Parse::Incomplete;
        'stream: while !rest.is_empty() {
            let piece = rng.index(rest.len()) + 1;
            let mut data = &rest[..piece];
            rest = &rest[piece..];
            while !data.is_empty() {
                let taken = heads.push(data);
                data = &data[taken..];
                loop {
                    match heads.next_request() {
                        Parse::Incomplete => break,
                        Parse::Done { req, consumed } => got.push(Parse::Done { req, consumed }),
                        error @ Parse::Error(_) => {
                            last = error;
                            break 'stream;
                        }
                    }
                }
                assert!(taken > 0 || data.is_empty(), "HeadBuf stalled");
            }
        }
        got.push(last);
        assert_eq!(got, expected, "stream {:?}, max_head {max_head}", String::from_utf8_lossy(&stream));
        pipelined += usize::from(got.len() > 2);
    }
    assert!(pipelined > 1000, "only {pipelined} streams held several requests");
}

const PATH_PIECES: &[&str] = &[
    "/", "/", "/", ".", ".", "..", "a", "b.txt", "%", "%2e", "%2E", "%2f", "%2F", "%5c", "\\", "%00", "%0a", "?", "#",
    "%c3%a9", "%c3", "é", ":", "C:", "~", "%25", "%2", "+", " ", "%%",
];

#[test]
fn resolve_path_never_leaves_the_root() {
    let mut rng = XorShift(0xdead_beef_cafe_f00d);
    let roots = [Path::new("/srv/www"), Path::new("www"), Path::new("/"), Path::new("")];
    let mut resolved = 0;
    for _ in 0..100_000 {
        let pieces = rng.index(10);
        let mut target = String::new();
        if rng.index(8) != 0 {
            target.push('/');
        }
        for _ in 0..pieces {
            let piece = *rng.pick::<&str>(PATH_PIECES);
            target.push_str(piece);
        }
        for root in roots {
            let Ok(path) = resolve_path(root, &target) else { continue };
            resolved += 1;
            let under = path.strip_prefix(root).unwrap_or_else(|_| panic!("{target:?} left {root:?}: {path:?}"));
            assert!(
                under.components().all(|c| matches!(c, Component::Normal(_))),
                "{target:?} under {root:?} gave {path:?}"
            );
            assert!(under.components().next().is_some(), "{target:?} resolved to the root itself");
        }
    }
    assert!(resolved > 10_000, "only {resolved} targets resolved");
}

#[test]
fn percent_encoding_round_trips() {
    let mut rng = XorShift(0x0123_4567_89ab_cdef);
    let alphabet: Vec<char> = "abcXYZ019-_.~é ü+=,;!$&'()*@".chars().collect();
    for _ in 0..10_000 {
        let segments: Vec<String> = (0..rng.index(4) + 1)
            .map(|_| (0..rng.index(6) + 1).map(|_| *rng.pick(&alphabet)).collect::<String>())
            .filter(|s| s != "." && s != "..")
            .collect();
        if segments.is_empty() {
            continue;
        }
        // Encode every byte, some bytes, or none that is safe to leave.
        let mut target = String::new();
        for segment in &segments {
            target.push('/');
            for b in segment.bytes() {
                if !b.is_ascii_graphic() || rng.index(3) == 0 {
                    target.push_str(&format!("%{b:02X}"));
                } else {
                    target.push(char::from(b));
                }
            }
        }
        let path = resolve_path(Path::new("/r"), &target).unwrap_or_else(|status| panic!("{target}: {status}"));
        let expected: std::path::PathBuf = std::iter::once("/r").chain(segments.iter().map(String::as_str)).collect();
        assert_eq!(path, expected, "{target}");
    }
}
