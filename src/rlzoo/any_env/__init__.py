"""Any Gymnasium env as a run takes it: rlzoo's own env keys, optional env families, observation spaces.

- :mod:`.options`: the env keys rlzoo reads itself (``frame_skip``, ``frame_stack``, ``atari``, ``observation``);
  every other key goes to ``gymnasium.make``.
- :mod:`.extras`: env families that come with an optional extra (``[atari]``, ``[mujoco]``, ``[box2d]``): their ids
  registered on demand, and one line naming the ``pip install`` when the extra is missing.
- :mod:`.wrappers` and :mod:`.making`: one env made with its wrappers (action repeat, Atari preprocessing with
  training-only reward clipping and life loss, flattening of Tuple/Dict observations).
- :mod:`.observations`: how a run observes the env (as SB3 takes it, flattened, or as an image for a CNN) and
  whether there is anything to normalise, decided once in the run plan and recorded in ``config.yaml``.
"""
