#!/bin/sh
# Generated from agentloop/shared/runs/search_attributes.py by `python deploy/generate.py`:
# edit those, not this file. Registers agentloop's search attributes in
# $TEMPORAL_NAMESPACE (default: default) of the Temporal server the temporal CLI
# is configured for (TEMPORAL_ADDRESS, TEMPORAL_TLS_*, ...), once the namespace
# exists; attributes already registered are left alone. Exits non-zero unless
# every one is registered at the end.
set -u
namespace="${TEMPORAL_NAMESPACE:-default}"
tries=0
until temporal operator namespace describe --namespace "$namespace" >/dev/null 2>&1; do
  tries=$((tries + 1))
  if [ "$tries" -ge 90 ]; then
    echo "namespace $namespace is not reachable after 3 minutes: check TEMPORAL_ADDRESS" >&2
    exit 1
  fi
  sleep 2
done
registered() { temporal operator search-attribute list --namespace "$namespace" | grep -qw "$1"; }
registered AgentStatus || temporal operator search-attribute create --namespace "$namespace" --name AgentStatus --type Keyword
registered AgentName || temporal operator search-attribute create --namespace "$namespace" --name AgentName --type Keyword
registered AgentModel || temporal operator search-attribute create --namespace "$namespace" --name AgentModel --type Keyword
registered AgentPendingTools || temporal operator search-attribute create --namespace "$namespace" --name AgentPendingTools --type KeywordList
registered AgentParentRun || temporal operator search-attribute create --namespace "$namespace" --name AgentParentRun --type Keyword
registered AgentRootRun || temporal operator search-attribute create --namespace "$namespace" --name AgentRootRun --type Keyword
registered AgentThread || temporal operator search-attribute create --namespace "$namespace" --name AgentThread --type Keyword
registered AgentForkedFrom || temporal operator search-attribute create --namespace "$namespace" --name AgentForkedFrom --type Keyword
registered AgentSchedule || temporal operator search-attribute create --namespace "$namespace" --name AgentSchedule --type Keyword
registered AgentVersion || temporal operator search-attribute create --namespace "$namespace" --name AgentVersion --type Keyword
registered AgentEval || temporal operator search-attribute create --namespace "$namespace" --name AgentEval --type KeywordList
registered AgentTenant || temporal operator search-attribute create --namespace "$namespace" --name AgentTenant --type Keyword
missing=0
registered AgentStatus || { echo "AgentStatus is not registered" >&2; missing=1; }
registered AgentName || { echo "AgentName is not registered" >&2; missing=1; }
registered AgentModel || { echo "AgentModel is not registered" >&2; missing=1; }
registered AgentPendingTools || { echo "AgentPendingTools is not registered" >&2; missing=1; }
registered AgentParentRun || { echo "AgentParentRun is not registered" >&2; missing=1; }
registered AgentRootRun || { echo "AgentRootRun is not registered" >&2; missing=1; }
registered AgentThread || { echo "AgentThread is not registered" >&2; missing=1; }
registered AgentForkedFrom || { echo "AgentForkedFrom is not registered" >&2; missing=1; }
registered AgentSchedule || { echo "AgentSchedule is not registered" >&2; missing=1; }
registered AgentVersion || { echo "AgentVersion is not registered" >&2; missing=1; }
registered AgentEval || { echo "AgentEval is not registered" >&2; missing=1; }
registered AgentTenant || { echo "AgentTenant is not registered" >&2; missing=1; }
[ "$missing" -eq 0 ] && echo "agentloop search attributes registered in namespace $namespace"
exit "$missing"
