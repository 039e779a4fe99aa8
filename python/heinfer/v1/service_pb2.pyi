from heinfer.v1 import protocol_pb2 as _protocol_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KIND_UNSPECIFIED: _ClassVar[Kind]
    KIND_KEYS: _ClassVar[Kind]
    KIND_QUERY: _ClassVar[Kind]
    KIND_STEP: _ClassVar[Kind]
    KIND_REPLY: _ClassVar[Kind]
    KIND_RESULT: _ClassVar[Kind]
KIND_UNSPECIFIED: Kind
KIND_KEYS: Kind
KIND_QUERY: Kind
KIND_STEP: Kind
KIND_REPLY: Kind
KIND_RESULT: Kind

class Part(_message.Message):
    __slots__ = ("kind", "index", "total", "size", "data")
    KIND_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    kind: Kind
    index: int
    total: int
    size: int
    data: bytes
    def __init__(self, kind: _Optional[_Union[Kind, str]] = ..., index: _Optional[int] = ..., total: _Optional[int] = ..., size: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class MessageLimits(_message.Message):
    __slots__ = ("keys", "query", "step", "reply", "result")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    keys: int
    query: int
    step: int
    reply: int
    result: int
    def __init__(self, keys: _Optional[int] = ..., query: _Optional[int] = ..., step: _Optional[int] = ..., reply: _Optional[int] = ..., result: _Optional[int] = ...) -> None: ...

class GetInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetInfoResponse(_message.Message):
    __slots__ = ("program_id", "limits", "max_part_bytes", "idle_timeout_s", "query_timeout_s")
    PROGRAM_ID_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    MAX_PART_BYTES_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    QUERY_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    program_id: str
    limits: MessageLimits
    max_part_bytes: int
    idle_timeout_s: float
    query_timeout_s: float
    def __init__(self, program_id: _Optional[str] = ..., limits: _Optional[_Union[MessageLimits, _Mapping]] = ..., max_part_bytes: _Optional[int] = ..., idle_timeout_s: _Optional[float] = ..., query_timeout_s: _Optional[float] = ...) -> None: ...

class OpenSessionRequest(_message.Message):
    __slots__ = ("part",)
    PART_FIELD_NUMBER: _ClassVar[int]
    part: Part
    def __init__(self, part: _Optional[_Union[Part, _Mapping]] = ...) -> None: ...

class OpenSessionResponse(_message.Message):
    __slots__ = ("session", "secret")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    session: str
    secret: str
    def __init__(self, session: _Optional[str] = ..., secret: _Optional[str] = ...) -> None: ...

class InferRequest(_message.Message):
    __slots__ = ("part", "message")
    PART_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    part: Part
    message: _protocol_pb2.Message
    def __init__(self, part: _Optional[_Union[Part, _Mapping]] = ..., message: _Optional[_Union[_protocol_pb2.Message, _Mapping]] = ...) -> None: ...

class InferResponse(_message.Message):
    __slots__ = ("part", "message")
    PART_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    part: Part
    message: _protocol_pb2.Message
    def __init__(self, part: _Optional[_Union[Part, _Mapping]] = ..., message: _Optional[_Union[_protocol_pb2.Message, _Mapping]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: str
    def __init__(self, session: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TwoPartyFrame(_message.Message):
    __slots__ = ("kind", "step", "count", "blob", "size", "offset", "data")
    KIND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    kind: int
    step: int
    count: int
    blob: int
    size: int
    offset: int
    data: bytes
    def __init__(self, kind: _Optional[int] = ..., step: _Optional[int] = ..., count: _Optional[int] = ..., blob: _Optional[int] = ..., size: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...
