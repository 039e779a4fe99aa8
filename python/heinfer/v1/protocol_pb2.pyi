from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Keys(_message.Message):
    __slots__ = ("program_id", "relin_key", "galois_keys")
    PROGRAM_ID_FIELD_NUMBER: _ClassVar[int]
    RELIN_KEY_FIELD_NUMBER: _ClassVar[int]
    GALOIS_KEYS_FIELD_NUMBER: _ClassVar[int]
    program_id: str
    relin_key: bytes
    galois_keys: bytes
    def __init__(self, program_id: _Optional[str] = ..., relin_key: _Optional[bytes] = ..., galois_keys: _Optional[bytes] = ...) -> None: ...

class Query(_message.Message):
    __slots__ = ("session", "ref", "items", "ciphertexts", "chunk", "chunks")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    session: str
    ref: str
    items: int
    ciphertexts: bytes
    chunk: int
    chunks: int
    def __init__(self, session: _Optional[str] = ..., ref: _Optional[str] = ..., items: _Optional[int] = ..., ciphertexts: _Optional[bytes] = ..., chunk: _Optional[int] = ..., chunks: _Optional[int] = ...) -> None: ...

class Step(_message.Message):
    __slots__ = ("query", "ref", "step", "ciphertexts", "chunk", "chunks")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    query: str
    ref: str
    step: int
    ciphertexts: bytes
    chunk: int
    chunks: int
    def __init__(self, query: _Optional[str] = ..., ref: _Optional[str] = ..., step: _Optional[int] = ..., ciphertexts: _Optional[bytes] = ..., chunk: _Optional[int] = ..., chunks: _Optional[int] = ...) -> None: ...

class Reply(_message.Message):
    __slots__ = ("query", "step", "ciphertexts", "chunk", "chunks")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    query: str
    step: int
    ciphertexts: bytes
    chunk: int
    chunks: int
    def __init__(self, query: _Optional[str] = ..., step: _Optional[int] = ..., ciphertexts: _Optional[bytes] = ..., chunk: _Optional[int] = ..., chunks: _Optional[int] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ("query", "ref", "ciphertexts")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    query: str
    ref: str
    ciphertexts: bytes
    def __init__(self, query: _Optional[str] = ..., ref: _Optional[str] = ..., ciphertexts: _Optional[bytes] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("keys", "query", "step", "reply", "result")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    keys: Keys
    query: Query
    step: Step
    reply: Reply
    result: Result
    def __init__(self, keys: _Optional[_Union[Keys, _Mapping]] = ..., query: _Optional[_Union[Query, _Mapping]] = ..., step: _Optional[_Union[Step, _Mapping]] = ..., reply: _Optional[_Union[Reply, _Mapping]] = ..., result: _Optional[_Union[Result, _Mapping]] = ...) -> None: ...
