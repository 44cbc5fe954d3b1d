"""The layering rule, read from `cargo metadata` on stdin (see ci/layering)."""
import json
import os
import sys

meta = json.load(sys.stdin)
root = meta["workspace_root"]


def rel(path):
    return os.path.relpath(path, root)


bad = []
for pkg in meta["packages"]:
    here = rel(os.path.dirname(pkg["manifest_path"]))
    if here.startswith(("core/", "apps/")):
        for dep in pkg["dependencies"]:
            path = dep.get("path")
            if path and rel(path).startswith("pmds/") and rel(path) != "pmds/sdk":
                kind = dep.get("kind") or "normal"
                bad.append(f"{here} depends on {rel(path)} ({kind}); core and apps may use pmds/sdk only")
    if here.startswith("pmds/") and here != "pmds/sdk":
        for target in pkg["targets"]:
            types = target["crate_types"]
            if any(k in ("lib", "rlib", "cdylib", "dylib") for k in target["kind"]) and types != ["cdylib"]:
                bad.append(f"{here}: library crate types {types}; a PMD builds a cdylib only")
for line in bad:
    print("layering:", line, file=sys.stderr)
if bad:
    sys.exit(1)
print(f"layering: {len(meta['packages'])} crates: core/ and apps/ use no PMD crate, every PMD is a cdylib only")
