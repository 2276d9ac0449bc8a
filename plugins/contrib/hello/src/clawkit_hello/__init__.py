"""clawkit-hello: the smallest useful clawkit plugin (see docs/writing-a-plugin.md).

It shows the four things most plugins do: add a config section, a tool, a
prompt section, and a touch on outgoing replies — plus a CLI command. The kernel
reads these ``@hookimpl`` functions from the source and imports this module when one
first runs; ``clawkit --help`` runs ``register_commands``, so the config model
(pydantic) is imported inside the hooks that use it.
"""

from __future__ import annotations

import functools

from clawkit import hookimpl


def _config(agent):
    cfg = agent.plugin("hello")
    if cfg:  # the validated section (an import statement per call would cost more than the rest of the hook)
        return cfg
    from .config import HelloConfig

    return HelloConfig()


@hookimpl
def register_config(register):
    from .config import HelloConfig

    register("hello", HelloConfig)


@hookimpl
def register_tools(register, agent):
    greeting = _config(agent).greeting

    def greet(name: str, excited: bool = False) -> str:
        """Greet someone by name.

        Args:
            name: who to greet
            excited: end with an exclamation mark
        """
        return f"{greeting}, {name}{'!' if excited else '.'}"

    register(greet)


@functools.cache
def _manners():
    """The prompt section, built once: this hook runs on every turn."""
    from clawkit.prompt import StaticContributor

    class Manners(StaticContributor):
        def should_contribute(self, ctx) -> bool:
            # a section about a tool appears only when the agent's `tools:` allows that tool
            return "greet" in ctx.tools

    return Manners("hello.manners", "Greet people with the greet tool when they introduce themselves.", heading="Manners", priority=200)


@hookimpl
def register_prompt_contributor(register, agent):
    register(_manners())


@hookimpl
def message_sending(ctx, outbound):
    if outbound.kind != "final_reply":  # called for every stream chunk too: the cheap test first
        return None
    signature = _config(ctx.agent).signature
    if signature:
        return f"{outbound.content}\n{signature}"


@hookimpl
def register_commands(cli):
    p = cli.command("hello", help="print a greeting (an example plugin command)")
    p.add_argument("name", nargs="?", default="world")

    def run(args) -> int:
        print(f"Hello, {args.name}!")
        return 0

    p.set_defaults(handler=run)
