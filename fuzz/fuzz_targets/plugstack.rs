//! `plugstack.conf` argument lines and `--lama-*` option values merged into a step's request,
//! threads and devices, as the plugin does. Input: the argument line, a line `---`, then
//! `name=value` option lines.
#![no_main]
use lama::plugin::options::{Options, Settings};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: (u16, &str)| {
    let (np, text) = data;
    let (line, opts) = text.split_once("\n---\n").unwrap_or((text, ""));
    let args: Vec<&str> = line.split_whitespace().collect();
    let settings = match Settings::parse(&args) {
        Ok(s) => s,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            Settings::default()
        }
    };
    let mut user = Options::default();
    for l in opts.lines() {
        let (name, value) = match l.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (l, None),
        };
        let _ = user.set(name, value);
    }
    let np = (np > 0).then_some(usize::from(np));
    let _ = settings.request(&user, np);
    let _ = settings.threads(&user);
    let _ = settings.devices(&user);
});
