#!/usr/bin/env python3
"""The Kubernetes manifests of docs/scale-out.md, checked for what the sweep needs (no cluster runs
here): a ReadWriteMany claim; an Indexed Job whose pods run `kvslim eval` with --shard
"$JOB_COMPLETION_INDEX/N", N equal to completions, parallelism within it, the output per shard
under the claim's mount; a merge Job on the same claim that merges every shard 0..N-1 once and
plots; and every option given to kvslim existing in that command's --help.

Skips (exit 77) only where python3-yaml is missing, never with CI=true."""
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_common import KVSLIM, SOURCE_DIR, fail, log, skip

try:
    import yaml
except ImportError:
    skip("python3-yaml not found (Debian package python3-yaml; scripts/install-deps.sh installs it)")

DOC = os.path.join(SOURCE_DIR, "docs", "scale-out.md")


def yaml_documents():
    text = open(DOC, encoding="utf-8").read()
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S)
    if not blocks:
        fail(f"{DOC} has no ```yaml block")
    docs = []
    for block in blocks:
        try:
            docs += [d for d in yaml.safe_load_all(block) if d is not None]
        except yaml.YAMLError as e:
            fail(f"{DOC}: a yaml block does not parse: {e}")
    return docs


def get(obj, path, what):
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            fail(f"{what}: no {path}")
        obj = obj[key]
    return obj


def one_container(job):
    name = get(job, "metadata.name", "a Job")
    containers = get(job, "spec.template.spec.containers", name)
    if len(containers) != 1:
        fail(f"{name}: want one container, got {len(containers)}")
    if get(job, "spec.template.spec.restartPolicy", name) not in ("Never", "OnFailure"):
        fail(f"{name}: a Job's restartPolicy must be Never or OnFailure")
    return containers[0]


def shell_script(container, what):
    """The container's command as shell text: command ["sh", "-c"] with the script in args."""
    argv = list(container.get("command", [])) + list(container.get("args", []))
    if argv[:2] != ["sh", "-c"] or len(argv) != 3:
        fail(f"{what}: want command [sh, -c] and the script as the one argument, got {argv}")
    return argv[2]


def mount_of(job, claims, what):
    """The mount path of the container's volume backed by one of the ReadWriteMany claims."""
    spec = get(job, "spec.template.spec", what)
    by_volume = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in spec.get("volumes", [])}
    for m in one_container(job).get("volumeMounts", []):
        if by_volume.get(m["name"]) in claims:
            return m["mountPath"].rstrip("/")
    fail(f"{what}: no volume mount of a ReadWriteMany claim ({sorted(claims)})")


def kvslim_commands(script):
    """Each `kvslim SUBCOMMAND ARGS` of a shell script, as argument lists (variables left as written)."""
    commands = []
    for part in re.split(r"[;\n]|&&", script):
        words = shlex.split(part, posix=True)
        if words and words[0] == "exec":
            words = words[1:]
        if words and words[0] == "kvslim":
            commands.append(words[1:])
    return commands


def check_options(subcommand, args):
    """Every --option in args is one `kvslim SUBCOMMAND --help` lists."""
    help_text = subprocess.run([KVSLIM, subcommand, "--help"], capture_output=True, text=True, timeout=30).stdout
    listed = set(re.findall(r"--[a-z][a-z0-9-]*", help_text))
    if not listed:
        fail(f"kvslim {subcommand} --help lists no options")
    for a in args:
        if a.startswith("--") and a.split("=")[0] not in listed:
            fail(f"the manifest gives kvslim {subcommand} {a}, which its --help does not list")


def option(args, name, what):
    if name not in args or args.index(name) + 1 >= len(args):
        fail(f"{what}: kvslim gets no {name}")
    return args[args.index(name) + 1]


def main():
    docs = yaml_documents()
    claims = {get(d, "metadata.name", "a claim") for d in docs if d.get("kind") == "PersistentVolumeClaim"
              and "ReadWriteMany" in get(d, "spec.accessModes", "a claim")}
    if not claims:
        fail("no PersistentVolumeClaim with accessModes ReadWriteMany (every pod writes to one folder)")
    jobs = [d for d in docs if d.get("kind") == "Job"]
    for j in jobs:
        if j.get("apiVersion") != "batch/v1":
            fail(f"Job {get(j, 'metadata.name', 'a Job')}: apiVersion must be batch/v1")
    indexed = [j for j in jobs if j.get("spec", {}).get("completionMode") == "Indexed"]
    merges = [j for j in jobs if j.get("spec", {}).get("completionMode") != "Indexed"]
    if len(indexed) != 1 or len(merges) != 1:
        fail(f"want one Indexed Job and one merge Job, got {len(indexed)} and {len(merges)}")
    sweep, merge = indexed[0], merges[0]

    # The sweep: shard INDEX of N, N the completions, one output folder per index on the claim.
    n = get(sweep, "spec.completions", "the Indexed Job")
    if not isinstance(n, int) or n < 2:
        fail(f"the Indexed Job's completions must be a count of shards >= 2, not {n!r}")
    parallelism = sweep["spec"].get("parallelism", 1)
    if not isinstance(parallelism, int) or not 1 <= parallelism <= n:
        fail(f"parallelism {parallelism!r} must be within 1..completions ({n})")
    mount = mount_of(sweep, claims, "the Indexed Job")
    commands = kvslim_commands(shell_script(one_container(sweep), "the Indexed Job"))
    if len(commands) != 1 or commands[0][0] not in ("eval", "claims"):
        fail(f"the Indexed Job's pods should run one kvslim eval (or claims), got {commands}")
    args = commands[0]
    shard = option(args, "--shard", "the Indexed Job")
    if shard != f"$JOB_COMPLETION_INDEX/{n}":
        fail(f"--shard is {shard!r}: want \"$JOB_COMPLETION_INDEX/{n}\" (the index of {n} completions)")
    out = option(args, "--out", "the Indexed Job")
    if not out.startswith(mount + "/") or not out.endswith("/$JOB_COMPLETION_INDEX"):
        fail(f"--out {out!r} must be a folder per index under the shared mount {mount}")
    shards_dir = out[: -len("/$JOB_COMPLETION_INDEX")]
    check_options(args[0], args[1:])
    log(f"Indexed Job: {n} shards, {parallelism} at once, kvslim {args[0]} --shard {shard} --out {out}")

    # The merge: the same claim, every shard folder once, then the plots.
    merge_mount = mount_of(merge, claims, "the merge Job")
    script = shell_script(one_container(merge), "the merge Job")
    cwd = re.search(r"\bcd\s+([^\s;&]+)", script)
    base = cwd.group(1).rstrip("/") if cwd else ""
    resolve = lambda p: p if p.startswith("/") or not base else f"{base}/{p}"
    merges_cmds = {c[0]: c[1:] for c in kvslim_commands(script)}
    if "eval-merge" not in merges_cmds or "plot" not in merges_cmds:
        fail(f"the merge Job should run kvslim eval-merge and kvslim plot, got {sorted(merges_cmds)}")
    merged, *inputs = [resolve(p) for p in merges_cmds["eval-merge"]]
    want = [f"{shards_dir.replace(mount, merge_mount, 1)}/{i}" for i in range(n)]
    if sorted(inputs) != sorted(want) or len(set(inputs)) != len(inputs):
        fail(f"eval-merge should join the {n} shard folders {want}, got {inputs}")
    if not merged.startswith(merge_mount + "/"):
        fail(f"eval-merge writes {merged}, outside the shared mount {merge_mount}")
    if [resolve(p) for p in merges_cmds["plot"]] != [merged]:
        fail(f"plot should draw the merged folder {merged}, got {merges_cmds['plot']}")
    log(f"merge Job: eval-merge {merged} <- {n} shard folders, then plot")
    log("k8s_manifest: passed")


if __name__ == "__main__":
    main()
