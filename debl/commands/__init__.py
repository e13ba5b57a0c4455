"""The ``debl`` subcommands, one module per command group.

The modules, not their commands, are imported by name here: ``debl.commands.query`` stays the
module (tests patch names in it), ``debl.commands.query.query`` is the command.
"""

from __future__ import annotations

from debl.commands import (bench, days, fresh, follow, gen_hf, generate, links, load, query,
                           source, stack, status, ui, verify)

# In the order of `debl --help`.
COMMANDS = [stack.stack, generate.generate, query.query, load.load, source.source, verify.verify,
            fresh.check_fresh, gen_hf.gen_hf, follow.follow, links.links, status.status, ui.ui,
            days.rollback, days.cleanup, bench.bench, bench.report]
