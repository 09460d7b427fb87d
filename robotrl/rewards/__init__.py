"""VLM-based rewards: language goals scored from rendered frames.

Modules: ``torchvision_compat`` (the torchvision import fix), ``encoders`` (the image-text
encoder contract and its ``lit`` and ``open_clip`` backends), ``captions`` (state-derived,
paraphrased captions), ``vlm`` (pure VLM-RM and CLG reward functions), ``scorer`` (batched,
asynchronous scoring), ``env`` (the VecEnv wrapper adding VLM reward terms and relabelling),
``preference`` (RL-VLM-F labellers and the Bradley-Terry ensemble).
"""
