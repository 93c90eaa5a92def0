use super::*;
use proptest::prelude::*;
use std::sync::Mutex;

/// A Control that records what it was asked and refuses pid 13.
#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<String>>,
}

impl Fake {
    /// Refuses pid 13 with a message of two lines (to be folded into one), and says what
    /// it did as a reload's summary otherwise.
    fn record(&self, what: String) -> Result<Done, Refusal> {
        let refused = what.ends_with(" 13");
        self.calls.lock().unwrap().push(what.clone());
        if refused {
            Err(Refusal::ReleasedWithFailures {
                pid: Pid(13),
                comm: what,
                restored: "no such managed process\nsecond line".into(),
            })
        } else {
            Ok(Done::Reloaded {
                summary: format!("{what}: done"),
            })
        }
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Control for Fake {
    fn status(&self) -> Status {
        self.calls.lock().unwrap().push("status".into());
        Status {
            daemon_pid: 1,
            uptime_s: 2,
            config: "c".into(),
            observe: false,
            managed_processes: 3,
            groups: 2,
            managed_threads: 4,
            paused_processes: 0,
        }
    }
    fn list(&self) -> Vec<ProcessEntry> {
        self.calls.lock().unwrap().push("list".into());
        vec![]
    }
    fn pause(&self, pid: Pid) -> Result<Done, Refusal> {
        self.record(format!("pause {pid}"))
    }
    fn resume(&self, pid: Pid) -> Result<Done, Refusal> {
        self.record(format!("resume {pid}"))
    }
    fn release(&self, pid: Pid) -> Result<Done, Refusal> {
        self.record(format!("release {pid}"))
    }
    fn reload(&self) -> Result<Done, Refusal> {
        self.record("reload".into())
    }
    fn threads(&self, _window_ms: u64) -> threads::ThreadsView {
        self.calls.lock().unwrap().push("threads".into());
        threads::ThreadsView {
            level: "core".into(),
            window_ms: 5,
            ..Default::default()
        }
    }
}

#[test]
fn parse_request_every_request_round_trips() {
    for r in [
        Request::Status,
        Request::List { all: false },
        Request::List { all: true },
        Request::Pause { pid: Pid(1) },
        Request::Resume { pid: Pid(i32::MAX) },
        Request::Release { pid: Pid(4242) },
        Request::Reload,
        Request::Threads { window_ms: 1000 },
        Request::Threads { window_ms: 250 },
    ] {
        assert_eq!(
            parse_request(r.to_line().as_bytes()).ok(),
            Some(r),
            "{}",
            r.to_line()
        );
    }
}

#[test]
fn parse_request_whitespace_and_key_order_are_free() {
    let r = parse_request(b" { \"pid\" : 5 , \"request\" : \"resume\", \"version\": 1 }\r");
    assert_eq!(r.ok(), Some(Request::Resume { pid: Pid(5) }));
}

#[test]
fn parse_request_each_malformed_line_is_one_named_error() {
    let long = format!(
        r#"{{"version":1,"request":"status","x":"{}"}}"#,
        "a".repeat(5000)
    );
    let cases: &[(&[u8], &str)] = &[
        (b"", "bad request: empty line"),
        (b"  ", "bad request: empty line"),
        (b"\xff\xfe", "bad request: not UTF-8"),
        (
            b"status",
            "bad request: not JSON: expected value at line 1 column 1",
        ),
        (b"[1]", "bad request: not a JSON object"),
        (b"\"status\"", "bad request: not a JSON object"),
        (
            br#"{"request":"status"}"#,
            "bad request: no \"version\" (this daemon speaks version 1)",
        ),
        (
            br#"{"version":2,"request":"status"}"#,
            "bad request: version 2 (this daemon speaks version 1)",
        ),
        (
            br#"{"version":"1","request":"status"}"#,
            "bad request: version \"1\" (this daemon speaks version 1)",
        ),
        (
            br#"{"version":1,"request":"jump"}"#,
            "bad request: unknown variant `jump`, expected one of `status`, `list`, `pause`, \
             `resume`, `release`, `reload`, `threads`",
        ),
        (br#"{"version":1}"#, "bad request: missing field `request`"),
        (
            br#"{"version":1,"request":"pause"}"#,
            "bad request: missing field `pid`",
        ),
        (
            br#"{"version":1,"request":"pause","pid":"4"}"#,
            "bad request: invalid type: string \"4\", expected i64",
        ),
        (
            br#"{"version":1,"request":"status","pid":4}"#,
            "bad request: unknown field `pid`, there are no fields",
        ),
        (
            br#"{"version":1,"request":"threads","pid":4}"#,
            "bad request: unknown field `pid`, expected `window_ms`",
        ),
        (
            br#"{"version":1,"request":"pause","pid":4,"force":true}"#,
            "bad request: unknown field `force`, expected `pid`",
        ),
        (
            br#"{"version":1,"request":"pause","pid":0}"#,
            "bad request: pid 0 is not a process id (1 or more)",
        ),
        (
            br#"{"version":1,"request":"pause","pid":2147483648}"#,
            "bad request: pid 2147483648 is not a process id (1 or more)",
        ),
        (long.as_bytes(), "bad request: longer than 4096 bytes"),
    ];
    for (line, want) in cases {
        // As the answer says it: the refusal and serde's error after it.
        let got = crate::error::Chain(&parse_request(line).unwrap_err()).to_string();
        assert_eq!(&got, want, "{:?}", String::from_utf8_lossy(line));
        assert!(!got.contains('\n'));
    }
}

#[test]
fn one_line_control_characters_and_length_are_cut() {
    assert_eq!(one_line("a\nb\tc"), "a b c");
    let long = one_line(&"x".repeat(1000));
    // 300 characters kept, plus the ellipsis.
    assert_eq!(long.chars().count(), 301);
}

#[test]
fn answer_bad_line_calls_nothing_and_says_error() {
    let fake = Fake::default();
    let r = answer(&fake, br#"{"version":1,"request":"release","pid":-3}"#);
    assert_eq!(
        r.reply,
        Reply::Error {
            message: "bad request: pid -3 is not a process id (1 or more)".into()
        }
    );
    assert!(fake.calls().is_empty());
}

#[test]
fn parse_request_threads_window_defaults_and_bounds() {
    // See: issue 40, item 4: the display window is the client's to choose.
    let threads = |text: &str| parse_request(text.as_bytes());
    assert_eq!(
        threads(r#"{"version":1,"request":"threads"}"#).ok(),
        Some(Request::Threads { window_ms: 1000 })
    );
    assert_eq!(
        threads(r#"{"version":1,"request":"threads","window_ms":60000}"#).ok(),
        Some(Request::Threads { window_ms: 60000 })
    );
    assert_eq!(
        threads(r#"{"version":1,"request":"threads","window_ms":0}"#)
            .unwrap_err()
            .to_string(),
        "bad request: window_ms 0 is not within 1-60000"
    );
    assert_eq!(
        threads(r#"{"version":1,"request":"list","all":true}"#).ok(),
        Some(Request::List { all: true })
    );
}

#[test]
fn render_list_all_names_each_candidate_and_why() {
    let r = Response::new(Reply::List {
        processes: vec![],
        candidates: Some(vec![Candidate {
            pid: 77,
            comm: "pbzip2".into(),
            rule: "busy".into(),
            why: "2 of 4 threads busy (50 %+), needs 3".into(),
        }]),
    });
    let (text, code) = r.render();
    assert_eq!(code, 0);
    assert!(
        text.ends_with(
            "not managed (1):\nPID      COMM             RULE             WHY\n\
             77       pbzip2           busy             2 of 4 threads busy (50 %+), needs 3\n"
        ),
        "{text}"
    );
    // Without `all`, no candidates travel.
    let plain = Response::new(Reply::List {
        processes: vec![],
        candidates: None,
    });
    assert!(!plain.to_line().contains("candidates"));
}

#[test]
fn answer_each_request_reaches_its_method() {
    let fake = Fake::default();
    for r in [
        Request::Status,
        Request::List { all: false },
        Request::List { all: true },
        Request::Pause { pid: Pid(7) },
        Request::Resume { pid: Pid(8) },
        Request::Release { pid: Pid(9) },
        Request::Reload,
        Request::Threads { window_ms: 1000 },
        Request::Threads { window_ms: 250 },
    ] {
        answer(&fake, r.to_line().as_bytes());
    }
    assert_eq!(
        fake.calls(),
        [
            "status",
            "list",
            "list",
            "pause 7",
            "resume 8",
            "release 9",
            "reload",
            "threads",
            "threads"
        ]
    );
}

#[test]
fn answer_refusal_is_an_error_on_one_line() {
    let fake = Fake::default();
    let r = answer(&fake, Request::Pause { pid: Pid(13) }.to_line().as_bytes());
    let line = r.to_line();
    assert!(!line.contains('\n'));
    assert_eq!(
        line,
        r#"{"version":1,"response":"error","message":"released 13 (pause 13), but no such managed process second line"}"#
    );
}

#[test]
fn response_status_line_parses_back() {
    let fake = Fake::default();
    let r = answer(&fake, br#"{"version":1,"request":"status"}"#);
    let line = r.to_line();
    assert!(line.starts_with(r#"{"version":1,"response":"status","daemon_pid":1,"#));
    let back: Response = serde_json::from_str(&line).unwrap();
    assert_eq!(back, r);
}

#[test]
fn response_threads_line_parses_back_and_renders_the_table() {
    let r = answer(&Fake::default(), br#"{"version":1,"request":"threads"}"#);
    let line = r.to_line();
    assert_eq!(
        line,
        r#"{"version":1,"response":"threads","level":"core","window_ms":5,"domains":[],"threads":[]}"#
    );
    assert_eq!(serde_json::from_str::<Response>(&line).unwrap(), r);
    assert_eq!(r.render(), ("level core, window 5 ms\n".to_string(), 0));
}

#[test]
fn render_status_worked_example() {
    let r = answer(&Fake::default(), br#"{"version":1,"request":"status"}"#);
    // uptime 2 s: 0 h, 0 m, 2 s.
    assert_eq!(
        r.render(),
        (
            "daemon pid 1, up 0h 0m 2s, managing\nconfig: c\nmanaged: 3 processes in 2 group(s), 4 threads, 0 paused\n"
                .to_string(),
            0
        )
    );
    let done = answer(&Fake::default(), Request::Reload.to_line().as_bytes());
    assert_eq!(done.render(), ("reloaded: reload: done\n".to_string(), 0));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// Arbitrary bytes: never a panic, never a call into Control, and the answer is one
    /// line of JSON that parses back as an error.
    #[test]
    fn answer_arbitrary_bytes_never_harm(bytes in proptest::collection::vec(any::<u8>(), 0..6000)) {
        let fake = Fake::default();
        let r = answer(&fake, &bytes);
        if let Ok(req) = parse_request(&bytes) {
            // Random bytes that happen to be a valid request must be answered normally.
            prop_assert_eq!(r.clone(), dispatch(&Fake::default(), req));
        } else {
            prop_assert!(fake.calls().is_empty());
            let is_error = matches!(r.reply, Reply::Error { .. });
            prop_assert!(is_error, "not an error");
        }
        let line = r.to_line();
        prop_assert!(!line.contains('\n'));
        prop_assert_eq!(serde_json::from_str::<Response>(&line).unwrap(), r);
    }

    /// Near-valid JSON objects (random keys and values around the real ones): parse or a
    /// one-line error, never a panic.
    #[test]
    fn parse_request_near_valid_objects_never_panic(
        version in prop_oneof![Just(json_num(1)), Just(json_num(2)), Just("\"1\"".to_string()), Just("null".to_string())],
        name in prop_oneof![Just("status"), Just("pause"), Just("release"), Just("reload"), Just("threads"), Just("x"), Just("")],
        pid in any::<i64>(),
        extra in "[a-z]{0,3}",
    ) {
        let text = if extra.is_empty() {
            format!(r#"{{"version":{version},"request":"{name}","pid":{pid}}}"#)
        } else {
            format!(r#"{{"version":{version},"request":"{name}","{extra}":{pid}}}"#)
        };
        match parse_request(text.as_bytes()) {
            Ok(Request::Pause { pid: p }) | Ok(Request::Release { pid: p }) => {
                prop_assert!(p.0 > 0);
                prop_assert_eq!(i64::from(p.0), pid);
            }
            Ok(other) => {
                let known = matches!(other, Request::Status | Request::Reload | Request::List { .. } | Request::Resume { .. } | Request::Threads { .. });
                prop_assert!(known, "unexpected {:?}", other);
            }
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
    }
}

fn json_num(n: u64) -> String {
    n.to_string()
}
