"""The tutorial notebooks run offline, against a throwaway store."""

import os
import tempfile

os.environ["AGIO_STORE"] = tempfile.mkdtemp(prefix="agio-notebooks-")
for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
    os.environ.pop(name, None)
