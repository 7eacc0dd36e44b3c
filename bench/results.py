"""Writing results: JSON and a markdown table side by side, plots where
matplotlib is (none with --smoke), and the PASS/FAIL lines of the drivers
that check rather than time."""

import json
import os
import sys


def write_results(out, stem, meta, markdown):
    """Writes `meta` as OUT/<stem>.json and `markdown` as OUT/<stem>.md."""
    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, stem + ".json"), meta)
    with open(os.path.join(out, stem + ".md"), "w") as f:
        f.write(markdown)


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def fmt(v, spec, none="-"):
    """format(v, spec), or `none` for a figure that was not measured."""
    return none if v is None else format(v, spec)


def pyplot(prog, what):
    """matplotlib.pyplot on the Agg backend, or None (said) without
    matplotlib: the numbers stand without their plot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("%s: no matplotlib, no %s" % (prog, what))
        return None
    return plt


def check_line(record, hide=()):
    """`PASS  name  {details}` for a {"check", "ok", ...} record; keys in
    `hide`, or starting with one of its entries that ends in "_", are left
    out."""
    extra = {
        k: v
        for k, v in record.items()
        if k not in ("check", "ok")
        and not any(
            k == h or (h.endswith("_") and k.startswith(h)) for h in hide
        )
    }
    return "%s  %s  %s" % (
        "PASS" if record["ok"] else "FAIL",
        record["check"],
        extra,
    )


def summary(prog, results, tail=""):
    """Prints `prog: P passed, F failed` and returns F."""
    failed = sum(not r["ok"] for r in results)
    print(
        "%s: %d passed, %d failed%s"
        % (prog, len(results) - failed, failed, tail)
    )
    sys.stdout.flush()
    return failed
