"""The plugin's config: ``plugins.contributors`` settings and the top-level ``contributors:`` list."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator, model_validator

from clawkit import hookimpl
from clawkit.prompt import Tag

BUILTIN_IDS = ("identity", "instructions", "tools", "project-context", "directives", "runtime")

#: a workspace prompts directory or project file that appears (or, for the directory, vanishes) while the agent
#: runs is noticed by the first prompt build this long after the last look (seconds): a look is a ``stat`` on
#: the event loop's thread, and at every prompt build it cost more than the rest of these sections (issue 29
#: goal 5); concurrent turns share one look. (Files in the directory: the watcher's ~50 ms.)
RECHECK_S = 0.05


class ContributorsConfig(BaseModel):
    """``plugins.contributors``: which built-in sections apply and where workspace sections live."""

    model_config = ConfigDict(extra="forbid")

    disable: list[str] = Field(default_factory=list, description=f"built-in sections to leave out: {', '.join(BUILTIN_IDS)}")
    project_files: list[str] = Field(
        default_factory=lambda: ["AGENTS.md", "README.md"],
        description="workspace files quoted in the project-context section, in this order",
    )
    project_files_max_chars: int = Field(8000, ge=0, description="budget for all project files together (characters)")
    prompts_dir: str = Field(".agents/prompts", description="directory (relative to the workspace) of *.md workspace sections")
    watch: bool = Field(True, description="reload workspace sections when they change (watchfiles)")

    @field_validator("disable")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        unknown = [x for x in v if x not in BUILTIN_IDS]
        if unknown:
            raise ValueError(f"unknown built-in section(s) {', '.join(unknown)}; choose from {', '.join(BUILTIN_IDS)}")
        return v


def _parse_tags(v: Any) -> list[Tag]:
    if v is None:
        return []
    if isinstance(v, (str, dict)):
        v = [v]
    if not isinstance(v, list):
        raise ValueError("tags must be a list of 'dimension:value' strings or {dimension: value} mappings")
    return [Tag.parse(t) for t in v]


class ContributorSpec(BaseModel):
    """One config-driven or workspace section."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, description="unique name, shown by `clawkit prompt`")
    content: str = Field("", description="the section text")
    heading: str = Field("", description="optional heading, rendered as '## heading'")
    tags: list[Tag] = Field(default_factory=list, description="'dimension:value' (topic, complexity, domain, channel, custom; '*' = any)")
    priority: int = Field(100, description="lower comes first")
    max_chars: int | None = Field(None, gt=0, description="cap for this section")

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, v: Any) -> list[Tag]:
        return _parse_tags(v)


class ContributorList(RootModel[list[ContributorSpec]]):
    """The agent YAML's top-level ``contributors:`` list."""

    root: list[ContributorSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> "ContributorList":
        seen: set[str] = set()
        for spec in self.root:
            if spec.id in seen:
                raise ValueError(f"contributor id {spec.id!r} appears twice")
            seen.add(spec.id)
        return self


def settings_of(agent: Any) -> ContributorsConfig:
    """This agent's ``plugins.contributors`` (defaults when absent or not validated)."""
    raw = agent.plugin("contributors") if agent is not None and hasattr(agent, "plugin") else None
    if isinstance(raw, ContributorsConfig):
        return raw
    if isinstance(raw, dict):
        return ContributorsConfig.model_validate({k: v for k, v in raw.items() if k != "enabled"})
    return ContributorsConfig()


def specs_of(agent: Any) -> list[ContributorSpec]:
    """This agent's top-level ``contributors:`` entries."""
    raw = getattr(agent, "contributors", None)
    if isinstance(raw, ContributorList):
        return raw.root
    if isinstance(raw, list):
        return ContributorList.model_validate(raw).root
    return []


@hookimpl
def register_config(register):
    register("contributors", ContributorsConfig)
    register("contributors", ContributorList, top_level=True)
