//! `ironpath new-pmd NAME`: a driver crate of its own, ready to build out of this
//! tree. Its `src/lib.rs` is the template PMD (`pmds/template`, compiled into this
//! program) with the names changed; its `Cargo.toml` depends on `ironpath-pmd-sdk`
//! as a published crate would be named (`version` and a `path` to this tree's SDK,
//! or `--sdk PATH`), and is a workspace of its own.

use std::path::{Path, PathBuf};

/// The template driver's source.
const TEMPLATE: &str = include_str!("../../../pmds/template/src/lib.rs");

/// Where this program's SDK was when it was built.
const BUILT_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pmds/sdk");

pub const USAGE: &str = "usage: ironpath new-pmd NAME [--dir DIR] [--sdk PATH]

Creates a PMD crate for driver net_NAME (NAME: lower-case letters, digits and `_`):
DIR (default ./ironpath-pmd-NAME) with Cargo.toml, src/lib.rs (the template driver,
renamed) and .gitignore. Then: cd DIR && cargo build --release, and load
target/release/libironpath_pmd_NAME.so with `ironpath testpmd -d FILE`.

  --dir DIR   where to create the crate (must not exist)
  --sdk PATH  the ironpath-pmd-sdk crate to build against
              [default: the one this ironpath was built from]";

/// What the user asked for.
struct Args {
    name: String,
    dir: PathBuf,
    sdk: PathBuf,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let (mut name, mut dir, mut sdk) = (None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dir" => dir = Some(PathBuf::from(it.next().ok_or("--dir needs a directory")?)),
            "--sdk" => sdk = Some(PathBuf::from(it.next().ok_or("--sdk needs the path of ironpath-pmd-sdk")?)),
            s if s.starts_with('-') => return Err(format!("unknown option `{s}`\n{USAGE}")),
            s if name.is_none() => name = Some(s.to_string()),
            s => return Err(format!("unexpected argument `{s}` (one NAME only)\n{USAGE}")),
        }
    }
    let name = name.ok_or(USAGE)?;
    let name = name.strip_prefix("net_").unwrap_or(&name).to_string();
    if name.is_empty()
        || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        || !name.as_bytes()[0].is_ascii_lowercase()
    {
        return Err(format!(
            "NAME `{name}`: use lower-case letters, digits and `_`, starting with a letter (the driver is net_NAME)"
        ));
    }
    let dir = dir.unwrap_or_else(|| PathBuf::from(format!("ironpath-pmd-{}", name.replace('_', "-"))));
    let sdk = match sdk {
        Some(s) => s,
        None => PathBuf::from(BUILT_SDK),
    };
    let sdk = sdk.canonicalize().map_err(|e| {
        format!("the SDK crate at {}: {e}; pass --sdk PATH (the pmds/sdk directory of an ironpath tree)", sdk.display())
    })?;
    if !sdk.join("Cargo.toml").is_file() {
        return Err(format!("{}: no Cargo.toml; pass --sdk PATH (the pmds/sdk directory)", sdk.display()));
    }
    Ok(Args { name, dir, sdk })
}

/// `mydrv` → `Mydrv`, `my_drv` → `MyDrv`.
fn camel(name: &str) -> String {
    name.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// The driver source for `name`: the template with its names changed and its head
/// comment saying where it came from.
pub fn source(name: &str) -> String {
    let body = TEMPLATE.split_once("\n//!\n").map_or(TEMPLATE, |(_, rest)| rest);
    let head = format!(
        "//! `net_{name}`: a PMD made with `ironpath new-pmd {name}` from the template driver.\n\
         //! Replace the reflector with your hardware or transport; `docs/writing-a-pmd.md`\n\
         //! of ironpath walks through every part of this file.\n//!\n"
    );
    let t = camel(name);
    (head + body)
        .replace("net_tmpl", &format!("net_{name}"))
        .replace("TmplPmd", &format!("{t}Pmd"))
        .replace("TmplRx", &format!("{t}Rx"))
        .replace("TmplTx", &format!("{t}Tx"))
}

/// The crate's `Cargo.toml`.
pub fn manifest(name: &str, sdk: &Path) -> String {
    let sdk_version = env!("CARGO_PKG_VERSION");
    format!(
        "[package]
name = \"ironpath-pmd-{dash}\"
version = \"0.1.0\"
edition = \"2021\"
publish = false

[lib]
# The host's directory scan picks files named libironpath_pmd_*.so.
name = \"ironpath_pmd_{name}\"
# A C-ABI shared object, loaded with dlopen() by the host.
crate-type = [\"cdylib\"]

[dependencies]
# The only ironpath crate a PMD depends on (it re-exports ironpath-abi).
ironpath-pmd-sdk = {{ version = \"{sdk_version}\", path = \"{sdk}\" }}

[lints.rust]
unsafe_op_in_unsafe_fn = \"deny\"

[lints.clippy]
undocumented_unsafe_blocks = \"deny\"

# The SDK turns a driver panic into an error code: panics must unwind.
[profile.release]
panic = \"unwind\"

# A workspace of its own, wherever it is created.
[workspace]
",
        dash = name.replace('_', "-"),
        sdk = sdk.display()
    )
}

/// `ironpath new-pmd ARGS`: exit code.
pub fn main(args: &[String]) -> i32 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        crate::outln!("{USAGE}");
        return 0;
    }
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ironpath new-pmd: {e}");
            return 2;
        }
    };
    if a.dir.exists() {
        eprintln!("ironpath new-pmd: {} exists already; choose another --dir", a.dir.display());
        return 1;
    }
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(a.dir.join("src"))?;
        std::fs::write(a.dir.join("Cargo.toml"), manifest(&a.name, &a.sdk))?;
        std::fs::write(a.dir.join("src/lib.rs"), source(&a.name))?;
        std::fs::write(a.dir.join(".gitignore"), "/target\n")
    };
    if let Err(e) = write() {
        eprintln!("ironpath new-pmd: {}: {e}", a.dir.display());
        return 1;
    }
    crate::outln!("created {}: driver net_{} (ironpath-pmd-sdk from {})", a.dir.display(), a.name, a.sdk.display());
    crate::outln!("build it and start testpmd with one port of it:\n  {}", hint(&a.dir, &a.name));
    0
}

/// The closing hint: one command that runs as printed from the directory `new-pmd`
/// ran in, naming this program by its own path (it need not be on `PATH`).
fn hint(dir: &Path, name: &str) -> String {
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "ironpath".to_string());
    format!(
        "cd {} && cargo build --release && {} testpmd -d target/release/libironpath_pmd_{name}.so --vdev net_{name}0 -- -i",
        shell_word(&dir.display().to_string()),
        shell_word(&exe),
    )
}

/// `s` as one shell word: as it is when it has no character the shell treats
/// specially, else in single quotes.
fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_the_template_renamed() {
        assert_eq!(camel("my_drv2"), "MyDrv2");
        let src = source("my_drv");
        assert!(src.starts_with("//! `net_my_drv`: a PMD made with `ironpath new-pmd my_drv`"));
        assert!(src.contains("const NAME: &'static CStr = c\"net_my_drv\";"));
        assert!(src.contains("pub struct MyDrvPmd") && src.contains("impl RxQueue for MyDrvRx"));
        assert!(!src.contains("Tmpl") && !src.contains("tmpl"), "every template name is replaced");
        assert!(src.contains("#![forbid(unsafe_code)]"));
        for bad in ["", "Big", "9lives", "a-b", "net_"] {
            assert!(parse(&[bad.to_string()]).is_err(), "{bad}");
        }
        let m = manifest("my_drv", Path::new("/x/sdk"));
        assert!(m.contains("name = \"ironpath_pmd_my_drv\"") && m.contains("path = \"/x/sdk\""));
        assert!(m.contains("[workspace]"));
    }

    #[test]
    fn the_hint_quotes_what_the_shell_would_split() {
        assert_eq!(shell_word("ironpath-pmd-x"), "ironpath-pmd-x");
        assert_eq!(shell_word("my dir/it's"), "'my dir/it'\\''s'");
        assert_eq!(shell_word(""), "''");
        let h = hint(Path::new("a b"), "x");
        assert!(h.starts_with("cd 'a b' && cargo build --release && "), "{h}");
        assert!(h.ends_with(" testpmd -d target/release/libironpath_pmd_x.so --vdev net_x0 -- -i"), "{h}");
    }
}
