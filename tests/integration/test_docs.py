"""The documentation states each fact once, under doc/; the copies that must exist (the man page,
`podrun --help`, the README's summary) are checked here against that one source, and the file
map of doc/design.md against the tree."""
import os
import re
import subprocess

from conftest import PODRUN, ROOT

DOC = ROOT / "doc"
DESIGN = DOC / "design.md"
MAP_ROOTS = ("include", "rdzv", "launcher")


def section(text, heading):
    """The body of the markdown section `heading` (its level and text, e.g. '## The file map'),
    up to the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    start = text.index("\n" + heading + "\n") + len(heading) + 2
    m = re.compile(rf"^#{{1,{len(level)}}} ", re.M).search(text, start)
    return text[start:m.start() if m else len(text)]


# ---- doc/design.md's file map ----------------------------------------------------------------

def design_map():
    """{folder: {file name: line number}} from the map: under a '### folder/' heading, each item
    `- `a.c` `a.h` — what it is` names the files before its dash."""
    text = DESIGN.read_text()
    body = section(text, "## The file map")
    first = text[:text.index(body)].count("\n")
    folders, folder = {}, None
    for i, line in enumerate(body.splitlines()):
        h = re.match(r"^### (\S+)/$", line)
        if h:
            folder = h.group(1)
            assert folder not in folders, f"doc/design.md:{first + i + 1}: {folder}/ twice"
            folders[folder] = {}
        elif line.startswith("- "):
            assert folder, f"doc/design.md:{first + i + 1}: an item before any '### folder/'"
            names = line[2:].split(" — ", 1)[0]
            found = re.findall(r"`([^`]+)`", names)
            assert found and re.sub(r"`[^`]+`|\s", "", names) == "", \
                f"doc/design.md:{first + i + 1}: write it as - `name.c` `name.h` — what it is"
            for n in found:
                assert n not in folders[folder], f"doc/design.md:{first + i + 1}: {n} twice"
                folders[folder][n] = first + i + 1
    return folders


def source_files():
    """Every .c and .h under include/, rdzv/ and launcher/, relative to the root."""
    out = set()
    for top in MAP_ROOTS:
        for d, _, files in os.walk(ROOT / top):
            for f in files:
                if f.endswith((".c", ".h")):
                    out.add(os.path.relpath(os.path.join(d, f), ROOT))
    return out


def test_file_map_names_every_source_file_and_only_those():
    folders = design_map()
    assert folders, "doc/design.md has no '## The file map' with '### folder/' headings"
    missing = []
    for path in sorted(source_files()):
        folder, name = os.path.split(path)
        if name not in folders.get(folder, {}):
            where = (f"under '### {folder}/'" if folder in folders else
                     f"under a new heading '### {folder}/' in '## The file map'")
            missing.append(f"{path} is not in doc/design.md's file map: add "
                           f"'- `{name}` — what it is' {where}")
    assert not missing, "\n".join(missing)
    gone = [f"doc/design.md:{line}: {folder}/{name} is in the file map but not in the tree: "
            f"remove it or correct its name"
            for folder, names in folders.items() for name, line in names.items()
            if not (ROOT / folder / name).is_file()]
    assert not gone, "\n".join(gone)
    outside = [f for f in folders if not f.split("/")[0] in MAP_ROOTS]
    assert not outside, f"the file map covers {MAP_ROOTS} only: {outside}"


# ---- the copies of doc/ facts in --help and the man page --------------------------------------

def podrun_help(*sub):
    r = subprocess.run([PODRUN, *sub, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def help_defaults():
    """{'--flag': default or None} from `podrun --help`'s option lines, the default in [...]."""
    out = {}
    for m in re.finditer(r"^  (?:-\w, |    )(--[a-z][a-z0-9-]*)(?: \S+)? +(.*)$", podrun_help(),
                         re.M):
        text, bracket, d = m.group(2).rpartition(" [")   # the default may hold [ ]: [[rank N]:]
        out[m.group(1)] = d[:-1] if bracket and d.endswith("]") else None
    assert "--nnodes" in out and "--exit-code-hang" in out, out
    return out


def man_text(s):
    """Roff source as the reader sees it: fonts dropped, escapes undone."""
    s = re.sub(r"\\f[BIRP]", "", s)
    return s.replace("\\-", "-").replace("\\(em", "—").replace("\\&", "")


def man_section(name):
    src = (DOC / "podrun.1").read_text()
    return src.split(f"\n.SH {name}\n", 1)[1].split("\n.SH ", 1)[0]


def table_rows(body, header):
    """The rows of the markdown table whose header row starts with `header`, as lists of cells."""
    lines = body.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
        rows.append([c.strip() for c in cells])
    return rows


def test_readme_links_the_exit_code_table_instead_of_copying_it():
    readme = (ROOT / "README.md").read_text()
    assert "](doc/failures.md#exit-status)" in readme
    assert "| situation | podrun exits | flag |" not in readme, \
        "README.md repeats the exit-code table: link to doc/failures.md#exit-status instead"


def words(text):
    return " ".join(text.replace("`", "").split())


def exit_codes_doc():
    """[(codes, flag, words)] in the order of doc/failures.md's exit-status table: codes are the
    whole numbers the row gives (none for 'that worker's code'), flag its --exit-code-* or None,
    words the flag and the situation as --help and podrun(1) must say them."""
    body = section((DOC / "failures.md").read_text(), "### Exit status")
    out = []
    for situation, code, flag in table_rows(body, "| situation | podrun exits | flag |"):
        flag = flag.replace("`", "") or None
        out.append((tuple(int(c) for c in re.findall(r"`(\d+)`", code)), flag,
                    words((f"{flag}: " if flag else "") + situation)))
    return out


def exit_code_entry(tag, text):
    flag = re.match(r"(--exit-code-[a-z-]+):", text)
    return (tuple(int(c) for c in re.findall(r"\b(\d+)\b", tag)),
            flag.group(1) if flag else None, words(text))


def differences(copy, doc):
    return "\n".join(f"  {c}\n  {d} (doc)" for c, d in zip(copy, doc) if c != d) or \
        f"  {len(copy)} entries, the table has {len(doc)}"


def test_exit_codes_in_help_and_man_page_equal_the_table():
    """--help and podrun(1) give the exit codes of doc/failures.md#exit-status, row for row, in
    the table's words and with its flags, and every flag's default is the code the table gives."""
    doc = exit_codes_doc()
    assert len(doc) >= 10 and ((175,), "--exit-code-preflight") in [d[:2] for d in doc], doc

    text = podrun_help().split("\nexit status", 1)[1]
    in_help = [exit_code_entry(m.group(1), m.group(2) + " " + (m.group(3) or ""))
               for m in re.finditer(r"^  (\S+(?:, \d+)?) {2,}(\S.*)\n((?: {12}\S.*\n)*)", text,
                                    re.M)]
    assert in_help == doc, "podrun --help's exit status (launcher/config/config.c, cfg_usage) " \
        "differs from doc/failures.md's table:\n" + differences(in_help, doc)

    entries = re.findall(r"^\.TP\n(.*)\n(.*)$", man_section("EXIT STATUS"), re.M)
    in_man = [exit_code_entry(man_text(tag), man_text(t).rstrip(".")) for tag, t in entries]
    assert in_man == doc, "doc/podrun.1's EXIT STATUS differs from doc/failures.md's table:\n" + \
        differences(in_man, doc)

    defaults = help_defaults()
    flags = {f for f in defaults if f.startswith("--exit-code-")}
    assert flags == {f for _, f, _ in doc if f}, (flags, doc)
    for codes, flag, _ in doc:
        if flag:
            assert defaults[flag] == str(codes[0]), (flag, defaults[flag], codes)


def help_store_defaults():
    """{'--flag': default or None} from `podrun store --help`: '(default X)' or '(default: X; ...)'."""
    out = {}
    text = podrun_help("store")
    for m in re.finditer(r"^  (--[a-z][a-z0-9-]*) \S+ +(.*(?:\n {20,}.*)*)", text, re.M):
        d = re.search(r"\(default:? ([^;)]+)", m.group(2))
        out[m.group(1)] = d.group(1).strip() if d else None
    assert "--max-key-len" in out, text
    return out


def man_options():
    """{'--flag': default or None} from podrun(1)'s OPTIONS entries: 'Default: X.'"""
    out = {}
    for entry in re.split(r"\n\.TP\n", man_section("OPTIONS"))[1:]:
        tag, _, body = entry.split("\n.SS", 1)[0].partition("\n")
        name = re.search(r"(--[a-z][a-z0-9-]*)", man_text(tag)).group(1)
        d = re.search(r"Default: (.+?)(?:[.,;]\s|\.?$)", " ".join(man_text(body).split()))
        out[name] = d.group(1) if d else None
    return out


def test_man_page_defaults_equal_help():
    """podrun(1) gives each option the default --help gives it (settings.c), and none where
    --help has none."""
    man, helps = man_options(), help_defaults()
    bad = [f"{o}: podrun(1) says {man[o]!r}, --help {helps.get(o)!r}"
           for o in sorted(man) if o in helps and man[o] != helps[o]]
    assert not bad, "\n".join(bad)


def help_texts():
    """{'--flag': its --help text without the [default]}."""
    out = {}
    for m in re.finditer(r"^  (?:-\w, |    )(--[a-z][a-z0-9-]*)(?: \S+)? +(.*)$", podrun_help(),
                         re.M):
        text, bracket, d = m.group(2).rpartition(" [")
        out[m.group(1)] = text if bracket and d.endswith("]") else m.group(2)
    return out


def test_man_page_options_begin_with_help_text():
    """Each option of podrun(1) starts with the words --help gives it (settings.c), then may say
    more: the two never tell a reader different things."""
    helps, bad = help_texts(), []
    for entry in re.split(r"\n\.TP\n", man_section("OPTIONS"))[1:]:
        tag, _, body = entry.split("\n.SS", 1)[0].partition("\n")
        name = re.search(r"(--[a-z][a-z0-9-]*)", man_text(tag)).group(1)
        body, want = " ".join(man_text(body).split()), " ".join(helps.get(name, "").split())
        if not body.lower().startswith(want.lower()):
            bad.append(f"{name}:\n  podrun(1): {body[:len(want) + 20]}\n  --help:    {want}")
    assert not bad, "podrun(1)'s options do not begin with --help's words:\n" + "\n".join(bad)


def split_cell(cell):
    """A table cell's comma-separated items, not splitting inside (), [] or ``."""
    items, depth, tick, cur = [], 0, False, ""
    for ch in cell:
        if ch == "`":
            tick = not tick
        elif not tick and ch in "([":
            depth += 1
        elif not tick and ch in ")]":
            depth -= 1
        if ch == "," and not depth and not tick:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return items + [cur.strip()] if cur.strip() else items


def option_tables():
    """(page, line, [flags], [default items]) for every row of a doc/*.md table with a 'default'
    column whose first cell names options."""
    for page in sorted(DOC.glob("*.md")):
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines[:-1]):
            head = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.startswith("|") or "default" not in head or \
                    not lines[i + 1].startswith("|---"):
                continue
            col = head.index("default")
            for j in range(i + 2, len(lines)):
                if not lines[j].startswith("|"):
                    break
                cells = [c.strip() for c in re.split(r"(?<!\\)\|", lines[j].strip()[1:-1])]
                flags = re.findall(r"`(--[a-z][a-z0-9-]*)(?![a-z0-9*-])", cells[0])
                if flags:
                    yield page.name, j + 1, flags, split_cell(cells[col])


def test_option_defaults_on_the_pages_equal_help():
    """Each option's default stands in one table of doc/, equal to what --help says (podrun store's
    options: `podrun store --help`)."""
    job, store = help_defaults(), help_store_defaults()
    seen, bad = {}, []
    for page, line, flags, items in option_tables():
        helps = store if page == "store.md" else job
        for flag, item in zip(flags, items) if len(items) == len(flags) else \
                zip(flags, items[:1] if len(flags) == 1 else []):
            m = re.match(r"^`([^`]*)`(?:$|;)", item)
            if not m:
                continue   # words, not a value: "off", "the host name", "`X` if writable"
            where = f"doc/{page}:{line}"
            if flag in seen:
                bad.append(f"{where}: {flag}'s default is also at {seen[flag]}: keep one")
            seen[flag] = where
            if flag not in helps:
                bad.append(f"{where}: {flag} is not an option of podrun"
                           f"{' store' if page == 'store.md' else ''}")
            elif m.group(1) != helps[flag]:
                bad.append(f"{where}: {flag} defaults to {m.group(1)!r} here, to {helps[flag]!r} "
                           "in --help")
    assert {"--nproc-per-node", "--preflight-timeout", "--max-key-len"} <= set(seen), seen
    assert not bad, "\n".join(bad)


def test_usage_names_every_option():
    """doc/usage.md's table is the index of options: every option of --help is in it, by name or
    as `--prefix-*`."""
    body = section((DOC / "usage.md").read_text(), "## Usage")
    rows = "\n".join(l for l in body.splitlines() if l.startswith("| `"))
    named = set(re.findall(r"`(--[a-z][a-z0-9-]*[a-z0-9])(?![a-z0-9*-])", rows))
    prefixes = re.findall(r"`(--[a-z][a-z0-9-]*-)\*`", rows)
    missing = sorted(o for o in help_defaults() if o not in named and
                     not any(o.startswith(p) for p in prefixes))
    assert not missing, f"doc/usage.md's option table lacks {missing}"


def precedence(text):
    """The order of the sources in 'default < scheduler (...) < PET_* < PODRUN_* < flags'."""
    m = re.search(r"default <.*?<\s*(?:flags|command line)", " ".join(text.split()))
    assert m, text[:200]
    chain = re.sub(r"\([^)]*\)|`", "", m.group(0))
    return [w.strip().replace("command line", "flags") for w in chain.split("<")]


def test_precedence_copies_equal_the_discovery_page():
    """The order of the sources is stated in doc/discovery.md; --help and podrun(1) repeat it."""
    doc = precedence(section((DOC / "discovery.md").read_text(), "## Discovery"))
    assert doc == ["default", "scheduler", "PET_*", "PODRUN_*", "flags"], doc
    assert precedence(podrun_help()) == doc
    assert precedence(man_text(man_section("DISCOVERY"))) == doc


def schedulers(text):
    """The scheduler names of 'from PyTorchJob, ..., JobSet/Indexed Job, ... or SLURM variables'."""
    m = re.search(r"from (PyTorchJob.*?) variables", " ".join(text.split()))
    assert m, text[:300]
    return {n.strip() for n in re.split(r",|/| or ", m.group(1)) if n.strip()}


def test_scheduler_lists_equal_the_detection_table():
    """The schedulers --discovery auto detects are the rows of doc/discovery.md's detection
    table; --help and podrun(1) name the same ones."""
    body = section((DOC / "discovery.md").read_text(), "## Discovery")
    doc = set()
    for _, source, _ in table_rows(body, "| # | source | detected by |"):
        doc |= {re.sub(r" v\d+$", "", n.strip()) for n in source.split(",")}
    assert {"Volcano", "SLURM", "Indexed Job"} <= doc, doc
    assert schedulers(podrun_help()) == doc
    assert schedulers(man_text(man_section("DISCOVERY"))) == doc


def test_rdzv_conf_defaults_equal_print_config():
    """The --rdzv-conf keys' defaults stand in doc/usage.md; each is what --print-config shows."""
    body = " ".join(section((DOC / "usage.md").read_text(), "## Usage").split())
    para = body[body.index("`--rdzv-conf` keys:"):]
    doc = dict(re.findall(r"`([a-z_]+)` \((\d+(?:\.\d+)?)(?: s)?[;,)]", para))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PODRUN_", "PET_"))}
    out = subprocess.run([PODRUN, "--print-config", "true"], capture_output=True, text=True,
                         env=env, timeout=30).stdout
    shown = {k: re.sub(r"s$", "", v) for k, v in re.findall(r"^rdzv-conf (\S+) +(\S+)", out, re.M)}
    assert {"join_timeout", "read_timeout", "keep_alive_max_attempt"} <= set(doc), para[:400]
    bad = {k: (v, shown.get(k)) for k, v in doc.items() if shown.get(k) != v}
    assert not bad, f"doc/usage.md's --rdzv-conf defaults differ from --print-config: {bad}"


def test_status_exit_codes_in_man_page_equal_its_help():
    """podrun(1) gives `podrun status`'s exit codes in the words of `podrun status --help`."""
    text = podrun_help("status")
    want = words(text[text.index("exit status:") + len("exit status:"):])
    man = words(man_text(man_section("COMMANDS")))
    assert "Exit status: " + want in man, f"podrun(1), podrun status: want 'Exit status: {want}'"


# ---- the README's figures -----------------------------------------------------------------------

def numbers(text):
    """The figures in text as written ('0.850', '16,000', '111'), not the digits of names (p99)."""
    return set(re.findall(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w])", text))


def test_readme_figures_are_on_the_performance_page():
    """Every figure of the README's Performance section is on doc/performance.md, spelled the same,
    where its date, conditions and command are."""
    readme = section((ROOT / "README.md").read_text(), "## Performance")
    page = numbers((DOC / "performance.md").read_text())
    assert {"111", "0.850", "53.8"} <= numbers(readme), readme
    missing = sorted(numbers(readme) - page)
    assert not missing, f"the README's Performance section gives {missing}, which " \
        "doc/performance.md does not: measure it there (date, conditions, command), or drop it"
