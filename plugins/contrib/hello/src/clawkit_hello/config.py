"""The hello plugin's config section (its own module, imported only when needed)."""

from pydantic import BaseModel, Field


class HelloConfig(BaseModel):
    """``plugins: {hello: {...}}`` in the agent YAML."""

    model_config = {"extra": "forbid"}

    greeting: str = Field("Hello", description="word used to greet")
    signature: str = Field("", description="appended to every final reply when set")
