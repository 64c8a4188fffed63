"""The nvcc flags a document may give: a budgets file's ``[compile] extra`` and a workload's
``[kernel] flags``. One list for both, as both are documents (a pull request's file, a workload
passed around) and neither may choose a program to run or a file to write."""

from __future__ import annotations

import re

# A budgets file may be a pull request's, and nvcc runs whatever -ccbin, --archiver-binary
# or --run name, hands -Xcompiler words to gcc (-wrapper runs a program) and writes where -o,
# -MF, --time or --keep-dir say. So [compile] extra takes only flags that change code
# generation or diagnostics, each one word (--std=c++17, not --std c++17).
SAFE_FLAGS = re.compile(r"""^(?:
    -O[0-3]
  | --?(?:use_fast_math|expt-relaxed-constexpr|extended-lambda|expt-extended-lambda
        |lineinfo|generate-line-info|restrict|res-usage|resource-usage
        |extra-device-vectorization|no-exceptions|noeh|keep-device-functions|src-in-ptx
        |source-in-ptx|err-no|display-error-number|no-err-no|no-display-error-number|ewp
        |extensible-whole-program|no-compress|m64|dlto|dlink-time-opt|dc|device-c|G
        |device-debug|g|debug|w|disable-warnings)
  | --?(?:std|ftz|prec-div|prec-sqrt|fmad|default-stream|maxrregcount|rdc
        |relocatable-device-code|arch|gpu-architecture|code|gpu-code|gencode|generate-code
        |diag-suppress|diag-error|diag-warn|ftemplate-depth|ftemplate-backtrace-limit
        |fmax-errors|threads|split-compile|compress-mode|frandom-seed|brief-diagnostics
        |device-stack-protector|static-global-template-stub
        |device-entity-has-hidden-visibility|dopt|optimize|Werror|jump-table-density|x)
        =[\w.+,\[\]=-]+
  | -[DU][A-Za-z_]\w*(?:=[^\0]*)?
  | -W(?:no-)?[a-z][a-z0-9-]*
)$""", re.X)
