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
