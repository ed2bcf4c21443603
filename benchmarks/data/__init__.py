"""The data the engine ships: prompts, image captions, research questions, documents and audio clips.

``DATA_DIR`` is the one name of this folder for the engine (the drivers' default inputs, the file
policy's default data root, the random models' vocabulary).
"""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
