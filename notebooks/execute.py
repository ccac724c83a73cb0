"""Execute notebooks headless with nbclient, as Jupyter would (working directory: the
notebook's folder), and print every cell's text output. Exits 1 at the first cell that
raises, with its traceback. The environment (AORTA_DATASET, AORTA_COMPARE, ...) passes
through to the kernel.

usage: python execute.py [--inplace] NOTEBOOK...
  --inplace  write the executed notebook (outputs and plots) back to its file
"""

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def run(path: Path, inplace: bool) -> bool:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    try:
        client.execute()
    except CellExecutionError as e:
        print(f"{path}: a cell failed:\n{e}", file=sys.stderr)
        return False
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                sys.stdout.write(out["text"])
    if inplace:
        nbformat.write(nb, path)
    return True


def main():
    args = sys.argv[1:]
    inplace = "--inplace" in args
    paths = [Path(a) for a in args if a != "--inplace"]
    if not paths:
        sys.exit(__doc__)
    sys.exit(0 if all(run(p, inplace) for p in paths) else 1)


if __name__ == "__main__":
    main()
