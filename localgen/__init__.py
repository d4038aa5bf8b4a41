"""localgen: chat with and generate text from local LLMs in the terminal."""

__version__ = "0.1.0"
