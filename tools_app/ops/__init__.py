"""Operations: health, the worker heartbeat, the embedded broker and the state folder."""
