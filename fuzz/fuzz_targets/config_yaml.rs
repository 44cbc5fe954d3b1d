//! Pipeline YAML files (what `ironpath run FILE` reads): any text must give a pipeline or a list
//! of positioned errors, never a panic or a stack overflow.
#![no_main]
use std::path::Path;

use ironpath_config::testing::mock_catalog;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match ironpath_config::parse_str(text, Path::new("fuzz/pipe.yaml"), &mock_catalog()) {
        Ok(p) => {
            assert!(!p.lcores.is_empty() && !p.nodes.is_empty() && !p.mempools.is_empty());
            for e in &p.edges {
                assert!(p.nodes.iter().any(|n| n.name == e.from) && p.nodes.iter().any(|n| n.name == e.to));
            }
        }
        Err(errs) => {
            assert!(!errs.errors.is_empty());
            assert!(errs.errors.windows(2).all(|w| w[0].loc <= w[1].loc));
            let shown = errs.to_string();
            assert_eq!(shown.lines().count(), errs.errors.len(), "one line per error: {shown}");
        }
    }
});
