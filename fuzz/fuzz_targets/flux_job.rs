//! What the Flux shell plugin reads for a job: the user's `-o lama.*` options (JSON), the
//! instance's `lama` configuration (JSON), the shell's rank info and the job's resource set R.
//! Input: four parts separated by lines `---`. Run with libFuzzer's memory limits.
#![no_main]
use lama::flux::{cores_per_node, settings, user_options, RankInfo};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let mut parts = text.splitn(4, "\n---\n");
    let options = parts.next().unwrap_or("");
    let conf = parts.next().unwrap_or("");
    let rank = parts.next().unwrap_or("");
    let r = parts.next().unwrap_or("");
    let user = user_options((!options.is_empty()).then_some(options));
    let site = settings((!conf.is_empty()).then_some(conf));
    if let (Ok(user), Ok(site)) = (&user, &site) {
        let _ = site.placing(user, Some(4));
        let _ = site.threads(user);
        let _ = site.devices(user);
    }
    if let Ok(info) = RankInfo::parse(rank) {
        // The ids are bounded by what Flux runs on one node; expanding them must stay bounded.
        if info.tasks.iter().map(|&(a, b)| u64::from(b - a) + 1).sum::<u64>() <= 1 << 16 {
            let _ = info.task_ids();
        }
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(r) {
        let _ = cores_per_node(&v);
    }
});
