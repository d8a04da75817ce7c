"""Writes the ONNX backend node tests that the installed `onnx` package defines
(onnx/backend/test/case/node) as test directories: OUT/node/<test>/model.onnx and
test_data_set_N/{input,output}_M.pb. Recent onnx wheels ship the node-test definitions but not
their generated data, so this runs the package's own generator over its node cases."""

import argparse
import sys
import types

import onnx.backend.test.case.node as node_cases
import onnx.backend.test.cmd_tools as cmd_tools


def main() -> None:
    out = sys.argv[1]
    cmd_tools.model_test = types.SimpleNamespace(collect_testcases=node_cases.collect_testcases)
    cmd_tools.generate_data(argparse.Namespace(output=out))


if __name__ == "__main__":
    main()
