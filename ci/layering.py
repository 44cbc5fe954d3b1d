"""The layering rule, read from `cargo metadata` on stdin (see ci/layering)."""
import json
import os
import sys

meta = json.load(sys.stdin)
root = meta["workspace_root"]


def rel(path):
    return os.path.relpath(path, root)


# Every workspace crate's path dependencies, by directory: [(directory, kind)].
deps = {
    rel(os.path.dirname(pkg["manifest_path"])): [
        (rel(dep["path"]), dep.get("kind") or "normal") for dep in pkg["dependencies"] if dep.get("path")
    ]
    for pkg in meta["packages"]
}


def eal_chain(start, seen=None):
    """The crates from `start` down to core/eal through normal and build dependencies
    (what `start` links), or None if it does not link core/eal."""
    if start == "core/eal":
        return [start]
    seen = set() if seen is None else seen
    if start in seen:
        return None
    seen.add(start)
    for dep, kind in deps.get(start, []):
        if kind != "dev":
            chain = eal_chain(dep, seen)
            if chain:
                return [start] + chain
    return None


bad = []
for pkg in meta["packages"]:
    here = rel(os.path.dirname(pkg["manifest_path"]))
    if here.startswith(("core/", "apps/")):
        for dep in pkg["dependencies"]:
            path = dep.get("path")
            if path and rel(path).startswith("pmds/") and rel(path) != "pmds/sdk":
                kind = dep.get("kind") or "normal"
                bad.append(f"{here} depends on {rel(path)} ({kind}); core and apps may use pmds/sdk only")
    if here.startswith("pmds/"):
        # A PMD (and the SDK) reaches the host through core/abi only, never core/eal.
        for dep, kind in deps.get(here, []):
            chain = eal_chain(dep)
            if chain:
                via = "" if len(chain) == 1 else " through " + " -> ".join(chain[:-1])
                bad.append(f"{here} depends on core/eal ({kind}{via}); a PMD uses core/abi and pmds/sdk only")
    if here.startswith("pmds/") and here != "pmds/sdk":
        for target in pkg["targets"]:
            types = target["crate_types"]
            if any(k in ("lib", "rlib", "cdylib", "dylib") for k in target["kind"]) and types != ["cdylib"]:
                bad.append(f"{here}: library crate types {types}; a PMD builds a cdylib only")
for line in bad:
    print("layering:", line, file=sys.stderr)
if bad:
    sys.exit(1)
print(
    f"layering: {len(meta['packages'])} crates: core/ and apps/ use no PMD crate, no PMD uses core/eal, "
    "every PMD is a cdylib only"
)
