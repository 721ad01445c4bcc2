"""Generates the protobuf and gRPC stubs of src/rebound/v1 from protocol/proto.

    python scripts/gen_stubs.py          # rewrite the checked-in stubs
    python scripts/gen_stubs.py --check  # fail if they differ from what the protos generate

The stubs are checked in so that `pip install ./clients/python` needs neither
grpcio-tools nor the proto files (which live outside the package); CI runs
`--check` so that they never drift from the protos. Needs the `test` extra,
which pins grpcio-tools and mypy-protobuf: another version generates other text.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

PACKAGE = Path(__file__).resolve().parents[1]
PROTO_ROOT = PACKAGE.parents[1] / "protocol" / "proto"
OUT = PACKAGE / "src"
GENERATED = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def generate(into: Path) -> list[Path]:
    """Runs protoc on every proto of rebound/v1; returns the files written."""
    protos = sorted((PROTO_ROOT / "rebound" / "v1").glob("*.proto"))
    bin_dir = Path(sys.executable).parent
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{Path(protoc.__file__).parent / '_proto'}",
        f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
        f"--python_out={into}",
        f"--grpc_python_out={into}",
        f"--mypy_out={into}",
        f"--mypy_grpc_out={into}",
        *(str(p.relative_to(PROTO_ROOT)) for p in protos),
    ]
    if protoc.main(args) != 0:
        sys.exit("protoc failed (see above)")
    return sorted(p for p in (into / "rebound" / "v1").iterdir() if p.name.endswith(GENERATED))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    check = parser.parse_args().check
    target = OUT / "rebound" / "v1"
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        names = {p.name for p in fresh}
        current = {p.name for p in target.iterdir() if p.name.endswith(GENERATED)}
        if check:
            stale = sorted(
                (names ^ current)
                | {p.name for p in fresh if p.name in current and not filecmp.cmp(p, target / p.name, shallow=False)}
            )
            if stale:
                sys.exit(
                    f"the stubs in {target} differ from what the protos generate: {', '.join(stale)}; "
                    "run `python scripts/gen_stubs.py` and commit the result"
                )
            print(f"{len(fresh)} generated stubs match the protos")
            return
        for name in current - names:
            (target / name).unlink()
        for path in fresh:
            shutil.copyfile(path, target / path.name)
        print(f"wrote {len(fresh)} files to {target}")


if __name__ == "__main__":
    main()
