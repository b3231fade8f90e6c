"""The file backend: the embedded default log, on local disk, needing no server."""

from .consumer import FileConsumer
from .directory import FileLogSettings
from .log import FileAdmin, FileLog
from .names import topic_dir, topic_dir_name
from .producer import FileProducer
from .topic_producer import FileTopicProducer

__all__ = ["FileAdmin", "FileConsumer", "FileLog", "FileLogSettings", "FileProducer",
           "FileTopicProducer", "topic_dir", "topic_dir_name"]
