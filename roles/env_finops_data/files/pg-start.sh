#!/bin/sh
# PostgreSQL for the billing data (store postgres). First boot creates the cluster, the owner `billing` with its
# database and the read-only reader `billing_reader`; the loader (python -m orchestrator.finops load-postgres)
# creates the table and grants the reader SELECT on it.
set -eu
PGBIN=/usr/lib/postgresql/15/bin
DATA=/var/lib/postgresql/data
if [ ! -s "$DATA/PG_VERSION" ]; then
  install -d -o postgres -g postgres -m 0700 "$DATA"
  runuser -u postgres -- "$PGBIN/initdb" -D "$DATA" --auth-local=trust --auth-host=scram-sha-256 -U postgres >/dev/null
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$DATA/pg_hba.conf"
  {
    printf "CREATE ROLE billing LOGIN PASSWORD '%s';\n" "$OWNER_PASSWORD"
    printf "CREATE DATABASE billing OWNER billing;\n"
    printf "CREATE ROLE billing_reader LOGIN PASSWORD '%s';\n" "$READER_PASSWORD"
    printf "ALTER ROLE billing_reader SET default_transaction_read_only = on;\n"
  } | runuser -u postgres -- "$PGBIN/postgres" --single -D "$DATA" postgres >/dev/null
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$PGBIN/postgres" -D "$DATA" -c listen_addresses='*' \
  -c max_connections=20 -c shared_buffers=32MB -c log_min_messages=warning
