from tools_app.models.analytics import RunHour, RunHourMark
from tools_app.models.audit import AuditEvent
from tools_app.models.cases import CaseCheck, CaseRun
from tools_app.models.egress import EgressException
from tools_app.models.integrations import Integration, IntegrationSecret
from tools_app.models.ledger import LedgerHead, SecretUse
from tools_app.models.oauth import OAuthConnection, OAuthState
from tools_app.models.presets import ToolPreset
from tools_app.models.runs import Run, RunArtifact, RunUpdate
from tools_app.models.signing import KeysDocument, SigningKey
from tools_app.models.tokens import AgentToken
from tools_app.models.tools import Tool, ToolVersion
from tools_app.models.workers import WorkerHeartbeat

__all__ = [
    "AgentToken",
    "AuditEvent",
    "CaseCheck",
    "CaseRun",
    "EgressException",
    "Integration",
    "IntegrationSecret",
    "KeysDocument",
    "LedgerHead",
    "OAuthConnection",
    "OAuthState",
    "Run",
    "RunArtifact",
    "RunHour",
    "RunHourMark",
    "RunUpdate",
    "SecretUse",
    "SigningKey",
    "Tool",
    "ToolPreset",
    "ToolVersion",
    "WorkerHeartbeat",
]
