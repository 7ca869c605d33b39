"""Write eval/temporal/{memories,queries}.jsonl and meta.json: questions that name a time.

    PYTHONPATH=python python eval/temporal/generate.py

The store is an agent's recurring work over six months (2026-05-25 to the fixed ``now``,
Monday 2026-11-23 12:00 UTC): deploys, auth bugs, on-call handovers, architecture
decisions, slow queries, flaky tests, mobile releases, escalations, upgrades, 1:1s,
postmortems, cost reviews, interviews, and the same in Chinese. Each topic recurs 12-16
times, so a question about one topic at one time ("how did I fix the auth bug last
week?") has a dozen same-topic distractors at other dates: a search blind to time ranks
them at random. Labels are the notes of the topic whose date falls in the window the time
expression means (eval/README.md gives the definitions; `window` below implements them).

Control questions name no time: they ask for one note by its own detail, and must not
get worse when a search starts reading time expressions.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SEED = 20261123
TODAY = date(2026, 11, 23)  # a Monday
START = date(2026, 5, 25)
NOW_ISO = "2026-11-23T12:00:00+00:00"

# (topic, how questions name it, [(note content, control question)])
TOPICS: list[tuple[str, list[str], list[tuple[str, str]]]] = [
    ("deploy", ["the hydra deploy", "deploying hydra", "what did we ship to production"], [
        ("Deployed hydra {v} to production: idempotent refunds endpoint; no errors.",
         "which hydra deploy shipped the idempotent refunds endpoint"),
        ("Deployed hydra {v} to production: webhook retries with backoff; smooth.",
         "hydra release with webhook retries and backoff"),
        ("Deployed hydra {v} to production after a failed canary; the second try was clean.",
         "hydra deploy that passed on the second try after the canary failed"),
        ("Deployed hydra {v} to production: new FX rate cache keyed by date.",
         "when did the FX rate cache keyed by date go out"),
        ("Deployed hydra {v} to production: dropped the legacy v1 refund routes.",
         "deploy that removed the legacy v1 refund routes"),
        ("Deployed hydra {v} to production: JPY exponent fix for refunds.",
         "the hydra deploy with the JPY exponent fix"),
        ("Deployed hydra {v} to production: statement timeout lowered to 5s for the API role.",
         "deploy that lowered the statement timeout"),
        ("Deployed hydra {v} to production; rolled back after 12 minutes because of 502s from "
         "the new connection pool.", "hydra deploy rolled back because of 502s"),
        ("Deployed hydra {v} to production: PCI logging redaction of card numbers.",
         "release that redacted card numbers from logs"),
        ("Deployed hydra {v} to production: rate limits per API key in Envoy.",
         "deploy that added per-key rate limits"),
        ("Deployed hydra {v} to production: multi-currency payouts behind a flag.",
         "hydra deploy with multi-currency payouts"),
        ("Deployed hydra {v} to production: faster reconciliation export.",
         "deploy that sped up the reconciliation export"),
        ("Deployed hydra {v} to production: Go 1.22 toolchain and smaller images.",
         "the deploy that moved hydra to the Go 1.22 toolchain"),
        ("Deployed hydra {v} to production: fix for duplicate webhook deliveries.",
         "hydra deploy fixing duplicate webhook deliveries"),
    ]),
    ("auth", ["the auth bug", "the login bug", "the authentication problem"], [
        ("Auth bug: SSO users with a plus sign in their email could not log in; the callback "
         "URL-decoded the address twice. Fixed the decoding.",
         "login failure for SSO emails with a plus sign"),
        ("Auth bug: the session cookie lacked SameSite=None, so the embedded widget logged "
         "users out. Set SameSite=None; Secure.", "embedded widget logging users out cookie"),
        ("Auth bug: JWTs rejected for five minutes after key rotation; the JWKS cache now "
         "refetches on an unknown kid.", "tokens rejected after signing key rotation"),
        ("Auth bug: password reset links expired after 60 s instead of 60 min (seconds vs "
         "minutes in the config). Fixed the unit.", "password reset links expiring too fast"),
        ("Auth bug: MFA codes failed for users whose phone clock drifted; widened the TOTP "
         "window to ±1 step.", "MFA codes failing because of phone clock drift"),
        ("Auth bug: refresh tokens were not revoked on logout; logout now deletes the token "
         "family.", "refresh tokens surviving logout"),
        ("Auth bug: the OAuth state parameter was not checked, a CSRF risk; now verified "
         "against the session.", "OAuth state parameter not verified"),
        ("Auth bug: users locked out after three failures from a shared office IP; the lockout "
         "is per account now, not per IP.", "lockouts from a shared office IP"),
        ("Auth bug: passkey sign-in failed on Firefox; the relying party id had a port in it.",
         "passkey sign-in broken on Firefox"),
        ("Auth bug: admin impersonation kept the admin's scopes; impersonated sessions now get "
         "the user's scopes only.", "admin impersonation keeping admin scopes"),
        ("Auth bug: SAML assertions with a clock skew of 2 min were refused; allowed 3 min "
         "skew.", "SAML assertions refused for clock skew"),
        ("Auth bug: the remember-me cookie survived a password change; the password change "
         "now rotates the session secret.", "remember-me cookie surviving a password change"),
        ("Auth bug: API keys with a trailing newline from copy-paste were rejected; keys are "
         "trimmed now.", "API keys rejected because of a trailing newline"),
    ]),
    ("oncall", ["who was on call", "the on-call handover", "on-call"], [
        ("On-call handover: Priya to Dmitri. Open: intermittent 504s from the geocoder.",
         "handover with intermittent geocoder 504s open"),
        ("On-call handover: Dmitri to Sam. Quiet week, one disk alert on ledger-db.",
         "quiet on-call week with a ledger-db disk alert"),
        ("On-call handover: Sam to Kenji. Open: Kafka lag spikes at 02:00 during the invoice run.",
         "on-call handover with Kafka lag at 2am"),
        ("On-call handover: Kenji to Marta. Paged twice for certificate expiry warnings.",
         "paged for certificate expiry warnings"),
        ("On-call handover: Marta to Wei. Open: flapping health check on atlas-tiles-3.",
         "flapping health check on atlas-tiles-3"),
        ("On-call handover: Wei to Priya. Three pages, all from the noisy CPU alert; alert "
         "threshold raised.", "noisy CPU alert threshold raised during on-call"),
        ("On-call handover: Priya to Arjun. Open: the CI runner autoscaler overshoot.",
         "on-call handover about the CI runner autoscaler overshoot"),
        ("On-call handover: Arjun to Lena. One sev-2: Stripe webhooks delayed for 20 min.",
         "sev-2 with delayed Stripe webhooks"),
        ("On-call handover: Lena to Dmitri. Open: etcd quota warning on prod-eu-1.",
         "etcd quota warning during on-call"),
        ("On-call handover: Dmitri to Yuki. Nothing open; runbook for Redis failover updated.",
         "handover where the Redis failover runbook was updated"),
        ("On-call handover: Yuki to Sam. Open: nightly backup job slower than usual.",
         "slow nightly backup job on call"),
        ("On-call handover: Sam to Priya. Paged at 03:00 for a full /var on hydra-worker-2.",
         "paged for a full /var on hydra-worker-2"),
        ("On-call handover: Priya to Kenji. Open: TLS handshake errors from one Android "
         "version.", "TLS handshake errors from one Android version"),
    ]),
    ("decision", ["what did we decide", "the architecture decision", "the decision we made"], [
        ("Decision: hydra keeps blue-green deploys; no canary tooling this year.",
         "decision to keep blue-green deploys"),
        ("Decision: we move traces to OpenTelemetry and retire Jaeger by Q1.",
         "decision to retire Jaeger"),
        ("Decision: new services are written in Go unless a team argues for Python in an RFC.",
         "decision on the default language for new services"),
        ("Decision: one Postgres cluster per product, no shared database between teams.",
         "no shared database between teams decision"),
        ("Decision: feature flags older than 90 days get removed in the next sprint.",
         "decision about removing old feature flags"),
        ("Decision: public APIs are versioned in the URL, not in headers.",
         "API versioning in the URL decision"),
        ("Decision: Argo CD deploys everything; nobody runs helm upgrade by hand.",
         "decision that Argo CD deploys everything"),
        ("Decision: incidents get a written review within five working days.",
         "decision about writing incident reviews within five days"),
        ("Decision: atlas serves PMTiles from object storage for offline maps.",
         "decision to serve PMTiles for offline maps"),
        ("Decision: secrets live in Vault only; .env files are banned from git.",
         "decision to ban env files from git"),
        ("Decision: the mobile app drops Android versions below API 26.",
         "decision on the minimum Android version"),
        ("Decision: ledger generates PDFs with WeasyPrint instead of wkhtmltopdf.",
         "decision to use WeasyPrint for PDFs"),
        ("Decision: code review within one working day, or the author may merge with a "
         "second reviewer's OK.", "decision about the one-day code review rule"),
    ]),
    ("slowquery", ["the slow query", "the database performance problem", "the slow SQL"], [
        ("Slow query: invoice search by customer took 9 s; added an index on "
         "(customer_id, issued_at).", "invoice search by customer index"),
        ("Slow query: the refunds report did a sequential scan on payments; added a partial "
         "index for status = 'refunded'.", "partial index for refunded payments"),
        ("Slow query: the dashboard count(*) over events took 20 s; replaced it with an "
         "estimate from pg_class.", "replacing count(*) with a pg_class estimate"),
        ("Slow query: N+1 queries in the order list endpoint; batched them with an IN list.",
         "N+1 queries in the order list"),
        ("Slow query: LIKE '%term%' on merchant names; switched to a trigram GIN index.",
         "trigram GIN index for merchant name search"),
        ("Slow query: the ledger balance view recomputed every row; made it a materialized "
         "view refreshed every 5 minutes.", "materialized view for ledger balances"),
        ("Slow query: ORDER BY created_at with OFFSET 100000 on audit logs; moved to keyset "
         "pagination.", "keyset pagination for audit logs"),
        ("Slow query: a missing foreign key index on payouts.merchant_id made deletes slow.",
         "missing index on payouts.merchant_id"),
        ("Slow query: JSONB filter on metadata->>'region' without an index; added an "
         "expression index.", "expression index on the metadata region"),
        ("Slow query: vacuum could not keep up on the sessions table; tuned autovacuum scale "
         "factor to 0.02.", "autovacuum tuning on the sessions table"),
        ("Slow query: the geocoder cache lookup did a cast that disabled the index; fixed the "
         "parameter type.", "cast that disabled the geocoder cache index"),
        ("Slow query: reporting on the primary slowed checkout; reports moved to the replica.",
         "reports moved to the replica because checkout slowed"),
        ("Slow query: a CTE fence in Postgres 11 style SQL; inlined it and the plan improved "
         "tenfold.", "inlining a CTE improved the plan"),
    ]),
    ("flaky", ["the flaky test", "the intermittent CI failure", "the flaky CI job"], [
        ("Flaky test: test_refund_webhook depended on dict order; sorted the payload.",
         "test_refund_webhook dict order"),
        ("Flaky test: the geocoder tests hit the real network; recorded fixtures instead.",
         "geocoder tests hitting the real network"),
        ("Flaky test: parallel workers shared one database; each worker gets a schema now.",
         "parallel test workers sharing one database"),
        ("Flaky test: a timezone assumption broke tests at midnight UTC; froze the clock.",
         "tests failing at midnight because of a timezone assumption"),
        ("Flaky test: the iOS UI test tapped before the animation ended; waits for the "
         "element now.", "iOS UI test tapping before the animation ended"),
        ("Flaky test: the Kafka integration test used a fixed port that was sometimes taken; "
         "uses a random free port.", "Kafka integration test fixed port"),
        ("Flaky test: a retry test slept 1 s and raced the scheduler; replaced sleep with an "
         "event.", "retry test racing the scheduler with sleep"),
        ("Flaky test: snapshot tests differed by font rendering on the new runner image; pinned "
         "fonts.", "snapshot tests differing by font rendering"),
        ("Flaky test: an order-dependent test leaked a feature flag; reset flags in teardown.",
         "test leaking a feature flag"),
        ("Flaky test: the PDF rendering test timed out on cold runners; warmed the font cache.",
         "PDF rendering test timing out on cold runners"),
        ("Flaky test: the e2e login test hit the rate limiter; tests use a separate API key.",
         "e2e login test hitting the rate limiter"),
        ("Flaky test: random seed not fixed in the property tests; the seed is printed and "
         "fixed in CI.", "property tests without a fixed seed"),
        ("Flaky test: the DNS-dependent health check test failed on runners without IPv6.",
         "health check test failing without IPv6"),
    ]),
    ("release", ["the orbit release", "the mobile release", "the app store release"], [
        ("Released orbit {v} to the App Store and Play Store: order tracking map.",
         "orbit release with the order tracking map"),
        ("Released orbit {v}: passkey login for new accounts.", "release that added passkeys"),
        ("Released orbit {v}: hotfix for the crash on launch after upgrading.",
         "hotfix for the crash on launch"),
        ("Released orbit {v}: dark mode and larger text support.", "release with dark mode"),
        ("Released orbit {v}: push notifications through FCM HTTP v1.",
         "release that moved push to FCM HTTP v1"),
        ("Released orbit {v}: offline cache for the last 20 orders.",
         "release with an offline order cache"),
        ("Released orbit {v}: deep links open the order page on cold start.",
         "release fixing deep links on cold start"),
        ("Released orbit {v}: battery fix, location updates only on significant change.",
         "release with the battery fix"),
        ("Released orbit {v}: new onboarding screens; review took three days.",
         "release with new onboarding screens"),
        ("Released orbit {v}: in-app chat with support behind a flag.",
         "release with in-app support chat"),
        ("Released orbit {v}: accessibility labels on every button.",
         "release adding accessibility labels"),
        ("Released orbit {v}: Apple rejected the first build over the privacy manifest; "
         "fixed and resubmitted.", "release rejected over the privacy manifest"),
        ("Released orbit {v}: tip the courier after delivery.", "release with courier tips"),
    ]),
    ("escalation", ["the customer escalation", "the support escalation", "the escalation"], [
        ("Escalation from Brightlane: payouts delayed by two days; a stuck batch, reran it.",
         "Brightlane payouts delayed"),
        ("Escalation from Norra Foods: invoices showed the wrong VAT rate for Sweden; fixed the "
         "rate table.", "Norra Foods wrong VAT rate"),
        ("Escalation from Kestrel Bikes: map tiles blank in their embedded widget; CORS header "
         "missing.", "Kestrel Bikes blank map tiles CORS"),
        ("Escalation from Pallas Health: SSO login loops; their IdP sent an unsigned response.",
         "Pallas Health SSO login loop"),
        ("Escalation from Umbra Games: webhooks arrived out of order; documented the sequence "
         "field.", "Umbra Games webhooks out of order"),
        ("Escalation from Verdant Co: CSV export cut at 10,000 rows; export streams now.",
         "Verdant CSV export truncated"),
        ("Escalation from Halcyon Travel: refunds in JPY wrong by 100x.",
         "Halcyon Travel JPY refunds"),
        ("Escalation from Oakridge Legal: needs invoices kept ten years; enabled object lock.",
         "Oakridge Legal ten-year invoice retention"),
        ("Escalation from Finch Retail: API rate limited during their sale; raised their burst.",
         "Finch Retail rate limited during a sale"),
        ("Escalation from Meridian Labs: geocoder returned the wrong city for Springfield; "
         "added the state to the query.", "Meridian Labs wrong Springfield"),
        ("Escalation from Solace Spa: push notifications not arriving on Android 14.",
         "Solace Spa push notifications on Android 14"),
        ("Escalation from Tundra Outdoor: duplicate charges after a timeout; refunded, "
         "idempotency key advice sent.", "Tundra Outdoor duplicate charges"),
        ("Escalation from Ivy School: the docs search showed stale pages.",
         "Ivy School stale docs search"),
    ]),
    ("upgrade", ["the upgrade", "the dependency upgrade", "upgrading"], [
        ("Upgraded Postgres from 15 to 16 on hydra with logical replication; 30 s write freeze.",
         "Postgres 16 upgrade on hydra"),
        ("Upgraded Kubernetes staging-eu-1 to 1.30; one deprecated API in an old chart.",
         "Kubernetes 1.30 upgrade on staging"),
        ("Upgraded React Native to 0.74 in orbit; new architecture on.",
         "React Native 0.74 upgrade"),
        ("Upgraded Django to 4.2 LTS in the admin tool; two middleware changes.",
         "Django 4.2 LTS upgrade"),
        ("Upgraded Go to 1.22 in hydra; loop variable semantics fixed one test.",
         "Go 1.22 upgrade in hydra"),
        ("Upgraded Kafka brokers to 3.7 with a rolling restart; no consumer downtime.",
         "Kafka 3.7 rolling upgrade"),
        ("Upgraded Node to 20 for quill; Astro build 30 % faster.", "Node 20 upgrade for quill"),
        ("Upgraded the AWS provider to 5.31 and pinned it after a bad plan.",
         "AWS provider 5.31 pin"),
        ("Upgraded MapLibre to 4.3 in atlas; the RTL plugin loads lazily now.",
         "MapLibre 4.3 upgrade"),
        ("Upgraded Redis to 7.2 on the hydra cache; eviction policy unchanged.",
         "Redis 7.2 upgrade"),
        ("Upgraded Airflow to 2.9 for ledger; DAG imports needed a fix.",
         "Airflow 2.9 upgrade for ledger"),
        ("Upgraded Python to 3.12 in ledger workers; WeasyPrint needed a new wheel.",
         "Python 3.12 upgrade in ledger"),
        ("Upgraded Envoy to 1.30; rate limit filter config renamed.", "Envoy 1.30 upgrade"),
    ]),
    ("oneonone", ["my 1:1 with Arjun", "the one-on-one with my manager", "the 1:1"], [
        ("1:1 with Arjun: talked about leading the Postgres upgrade; he wants a written plan.",
         "1:1 about leading the Postgres upgrade"),
        ("1:1 with Arjun: feedback that my RFCs are too long; lead with the decision.",
         "feedback that my RFCs are too long"),
        ("1:1 with Arjun: promotion case needs more cross-team impact.",
         "promotion case needs cross-team impact"),
        ("1:1 with Arjun: agreed I mentor Kenji for the next quarter.",
         "agreed to mentor Kenji"),
        ("1:1 with Arjun: too many meetings; I decline recurring ones without an agenda.",
         "declining meetings without an agenda"),
        ("1:1 with Arjun: conference budget approved for one trip.",
         "conference budget approved"),
        ("1:1 with Arjun: on-call load is uneven; he will rebalance the rotation.",
         "uneven on-call load discussed with my manager"),
        ("1:1 with Arjun: goals for H2: observability, the upgrade, hiring two engineers.",
         "goals for the second half of the year"),
        ("1:1 with Arjun: I asked for a quieter week after the incident.",
         "asked for a quieter week after the incident"),
        ("1:1 with Arjun: he liked the incident write-up; share it company-wide.",
         "incident write-up shared company-wide"),
        ("1:1 with Arjun: discussed moving to the platform team next year.",
         "moving to the platform team next year"),
        ("1:1 with Arjun: salary review is in January; collect my accomplishments.",
         "salary review in January"),
        ("1:1 with Arjun: he asked me to run the hiring loop for the SRE role.",
         "run the hiring loop for the SRE role"),
    ]),
    ("postmortem", ["the postmortem", "the incident review", "the outage"], [
        ("Postmortem: the CI autoscaler launched 400 spot instances; hard cap of 60 added.",
         "CI autoscaler launched 400 instances"),
        ("Postmortem: Redis keys expired together and stampeded Postgres; added jitter.",
         "cache keys expiring together stampeding the database"),
        ("Postmortem: etcd hit its quota and the API server went read-only.",
         "etcd quota made the API server read-only"),
        ("Postmortem: the geocoder ran out of heap for 40 minutes.",
         "geocoder out of heap for 40 minutes"),
        ("Postmortem: an expired webhook certificate broke staging deploys.",
         "expired webhook certificate broke staging"),
        ("Postmortem: the OAuth redirect URI changed only on one side; sign-in down 25 min.",
         "OAuth redirect URI mismatch took sign-in down"),
        ("Postmortem: clock drift on a worker broke Stripe signature checks.",
         "clock drift broke Stripe signatures"),
        ("Postmortem: a DNS change with a 24 h TTL left the old load balancer in use.",
         "DNS change with a long TTL"),
        ("Postmortem: a migration locked the payments table for 4 minutes at peak.",
         "migration locked the payments table at peak"),
        ("Postmortem: a full disk on the tile builder stopped the nightly batch.",
         "full disk stopped the nightly tile batch"),
        ("Postmortem: a bad feature flag default turned off checkout in one region.",
         "feature flag default turned off checkout"),
        ("Postmortem: the CDN cached 404s for map tiles after a bad deploy.",
         "CDN cached 404s for tiles"),
        ("Postmortem: Kafka consumer lag reached two million after a broker restart.",
         "Kafka lag two million after broker restart"),
    ]),
    ("cost", ["the cloud cost review", "the AWS bill", "cloud spending"], [
        ("Cost review: NAT gateway traffic is 18 % of the bill; added S3 and ECR endpoints.",
         "NAT gateway traffic share of the bill"),
        ("Cost review: idle staging databases cost 2k a month; they stop at night now.",
         "idle staging databases stopped at night"),
        ("Cost review: moved CI runners to spot; 60 % cheaper.", "CI runners moved to spot"),
        ("Cost review: CloudWatch log ingestion too high; debug logs off in production.",
         "log ingestion cost from debug logs"),
        ("Cost review: unattached EBS volumes cleaned up, 300 GB.",
         "unattached EBS volumes cleaned up"),
        ("Cost review: Savings Plan for the steady compute, one year, no upfront.",
         "Savings Plan for steady compute"),
        ("Cost review: the tile CDN egress doubled; longer cache TTLs for raster tiles.",
         "tile CDN egress doubled"),
        ("Cost review: S3 lifecycle rules move invoice archives to Glacier after 90 days.",
         "invoice archives lifecycle to Glacier"),
        ("Cost review: oversized RDS instance for ledger; downsized one class.",
         "downsized the ledger RDS instance"),
        ("Cost review: cross-AZ traffic from Kafka; rack-aware consumers enabled.",
         "cross-AZ Kafka traffic"),
        ("Cost review: GPU instance left running after an experiment; tagged and alarmed.",
         "GPU instance left running after an experiment"),
        ("Cost review: the bill dropped 12 % month over month.",
         "bill dropped 12 percent month over month"),
        ("Cost review: third-party monitoring seats trimmed to active users.",
         "monitoring seats trimmed"),
    ]),
    ("zh-bug", ["修复的登录问题", "登录 bug", "修的登录故障"], [
        ("修复登录问题：短信验证码在网关重试时被发送了两次，已在网关加去重。", "短信验证码发送两次"),
        ("修复登录问题：微信登录回调地址配置错误，导致无法跳转。", "微信登录回调地址错误"),
        ("修复登录问题：会话在负载均衡切换后丢失，改为 Redis 存储会话。", "会话在负载均衡切换后丢失"),
        ("修复登录问题：验证码图片在深色模式下看不清，调整了对比度。", "验证码图片深色模式看不清"),
        ("修复登录问题：海外用户手机号格式校验过严，放宽了国家码规则。", "海外手机号格式校验过严"),
        ("修复登录问题：记住我选项在 Safari 中失效，原因是第三方 Cookie 被拦截。", "记住我在 Safari 失效"),
        ("修复登录问题：密码输入框禁用了粘贴，影响密码管理器，已恢复。", "密码输入框禁止粘贴"),
        ("修复登录问题：单点登录令牌过期时间与服务器时钟不一致。", "单点登录令牌过期时钟不一致"),
        ("修复登录问题：多次失败后账号锁定时间过长，改为十五分钟。", "账号锁定时间过长"),
        ("修复登录问题：扫码登录二维码刷新太频繁，改为两分钟一次。", "扫码登录二维码刷新太频繁"),
        ("修复登录问题：企业用户的域名白名单大小写敏感，已改为不区分大小写。", "域名白名单大小写敏感"),
        ("修复登录问题：登出后返回按钮仍能看到账户页面，已禁用缓存。", "登出后返回按钮仍能看到账户页面"),
    ]),
    ("zh-deploy", ["上线", "发布", "部署"], [
        ("上线记录：ledger 发票服务 {v} 发布到生产，新增电子发票导出。", "电子发票导出上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，修复了增值税四舍五入。", "增值税四舍五入修复上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，对账报表提速。", "对账报表提速上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，支持日元结算。", "支持日元结算的上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，催款邮件模板更新。", "催款邮件模板更新上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，PDF 字体问题修复。", "PDF 字体问题修复上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，信用票据单独编号。", "信用票据单独编号上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，回滚了一次失败的迁移。", "回滚失败迁移的上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，Kafka 消费者扩容。", "Kafka 消费者扩容上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，审计日志归档。", "审计日志归档上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，多语言发票模板。", "多语言发票模板上线"),
        ("上线记录：ledger 发票服务 {v} 发布到生产，季度结账冻结开关。", "季度结账冻结开关上线"),
    ]),
]  # fmt: skip

# Recurring status notes of each topic: the same topic at many other dates. They are
# related (grade 1) to a question about their topic when their date is in its window.
STATUS: dict[str, str] = {
    "deploy": "Deployed hydra {v} to production: routine dependency updates; no errors.",
    "auth": "Auth bug triage: {n} open login tickets, {m} of them from SSO customers.",
    "oncall": "On-call handover: {p} to {q}. Nothing open, {n} pages in total.",
    "decision": "Architecture review: {n} RFCs discussed; decisions on {m} of them postponed.",
    "slowquery": "Slow query report: {n} queries over 1 s this week, the worst took {m} s.",
    "flaky": "Flaky test report: {n} flaky tests quarantined, CI pass rate {r} %.",
    "release": "Released orbit {v}: bug fixes and performance improvements.",
    "escalation": "Escalation queue: {n} open, the oldest waiting {m} days.",
    "upgrade": "Upgraded {n} minor dependency versions via Renovate; {m} needed manual fixes.",
    "oneonone": "1:1 with Arjun: status update, {n} items on the list, nothing new.",
    "postmortem": "Postmortem follow-up: {m} of {n} action items closed.",
    "cost": "Cost review: the bill was {n}.{m}k this month, {r} % of budget.",
    "zh-bug": "登录问题周报：本周新增 {n} 个登录相关工单，其中 {m} 个来自企业客户。",
    "zh-deploy": "上线记录：ledger 发票服务 {v} 发布到生产，常规依赖更新。",
}
STATUS_PER_TOPIC = 14
PEOPLE = ["Priya", "Dmitri", "Sam", "Kenji", "Marta", "Wei", "Arjun", "Lena", "Yuki"]

EN_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]  # fmt: skip


def day_window(d: date) -> tuple[date, date]:
    return d, d


def week_of(d: date) -> tuple[date, date]:
    monday = d - timedelta(days=d.weekday())
    return monday, monday + timedelta(days=6)


def last_weekday(name: str) -> date:
    """The most recent such weekday strictly before today (on a Monday, "last Monday" is a
    week ago and "last Sunday" is yesterday)."""
    target = EN_WEEKDAYS.index(name)
    back = (TODAY.weekday() - target) % 7 or 7
    return TODAY - timedelta(days=back)


def month_window(month: int) -> tuple[date, date]:
    """The most recent month of that name that has begun (this year if so, else last)."""
    year = TODAY.year if month <= TODAY.month else TODAY.year - 1
    first = date(year, month, 1)
    nxt = date(year + (month == 12), month % 12 + 1, 1)
    return first, nxt - timedelta(days=1)


ZH_NUM = {1: "一", 2: "两", 3: "三", 4: "四", 5: "五", 6: "六", 7: "七", 10: "十"}


def expressions() -> list[tuple[str, str, tuple[date, date]]]:
    """(English expression, Chinese expression or "", window of whole days, inclusive).

    Every window ends on or before today; notes of today are all before `now`."""
    out: list[tuple[str, str, tuple[date, date]]] = [
        ("today", "今天", day_window(TODAY)),
        ("yesterday", "昨天", day_window(TODAY - timedelta(days=1))),
        ("the day before yesterday", "前天", day_window(TODAY - timedelta(days=2))),
        ("last week", "上周", week_of(TODAY - timedelta(days=7))),
        ("this week", "这周", (week_of(TODAY)[0], TODAY)),
        ("two weeks ago", "两周前", week_of(TODAY - timedelta(days=14))),
        ("this month", "这个月", (TODAY.replace(day=1), TODAY)),
        ("last month", "上个月", month_window(TODAY.month - 1)),
        ("in the last 7 days", "最近七天", (TODAY - timedelta(days=7), TODAY)),
        ("in the past 30 days", "最近三十天", (TODAY - timedelta(days=30), TODAY)),
        ("last weekend", "上周末", (last_weekday("Saturday"), last_weekday("Sunday"))),
    ]
    for n in (3, 4, 5, 6, 10):
        d = TODAY - timedelta(days=n)
        out.append((f"{n} days ago", f"{ZH_NUM[n]}天前", day_window(d)))
    for name in ("Tuesday", "Wednesday", "Thursday", "Friday"):
        zh = "上周" + "一二三四五六日"[EN_WEEKDAYS.index(name)]
        out.append((f"last {name}", zh, day_window(last_weekday(name))))
    for m in (6, 7, 8, 9, 10):
        out.append((f"in {MONTHS[m - 1]}", f"{m}月", month_window(m)))
    out += [
        ("since 2026-10-01", "2026-10-01 以来", (date(2026, 10, 1), TODAY)),
        ("since November 10", "11月10日以来", (date(2026, 11, 10), TODAY)),
        ("before 2026-07-01", "2026-07-01 之前", (START, date(2026, 6, 30))),
        ("between 2026-08-01 and 2026-08-31", "2026-08-01 到 2026-08-31 之间",
         (date(2026, 8, 1), date(2026, 8, 31))),
        ("between September 15 and October 15", "9月15日到10月15日之间",
         (date(2026, 9, 15), date(2026, 10, 15))),
        ("after 2026-11-01", "2026-11-01 之后", (date(2026, 11, 2), TODAY)),
        ("around 2026-09-15", "2026-09-15 前后", (date(2026, 9, 12), date(2026, 9, 18))),
        ("on 2026-11-05", "2026-11-05", day_window(date(2026, 11, 5))),
        ("in Q3", "第三季度", (date(2026, 7, 1), date(2026, 9, 30))),
    ]  # fmt: skip
    return out


def topic_dates(rng: random.Random, count: int, index: int) -> list[date]:
    """Dates of one topic's notes: one in last week, one or two earlier in November, the
    rest spread over June to October; some topics also get today, yesterday and the days
    just before, so that every short window holds some topic."""
    days: set[date] = set()
    last_week = week_of(TODAY - timedelta(days=7))[0]
    days.add(last_week + timedelta(days=(index * 3) % 7))
    days.add(date(2026, 11, 2) + timedelta(days=(index * 5) % 12))
    recent = [TODAY - timedelta(days=k) for k in range(0, 11)]
    days.add(recent[index % len(recent)])
    days.add(recent[(index * 7 + 3) % len(recent)])
    span = (date(2026, 10, 31) - START).days
    while len(days) < count:
        days.add(START + timedelta(days=rng.randrange(span)))
    return sorted(days)


def stamp(rng: random.Random, d: date) -> str:
    hour = rng.randint(8, 11) if d == TODAY else rng.randint(8, 19)
    t = time(hour, rng.randint(0, 59))
    return datetime.combine(d, t).strftime("%Y-%m-%dT%H:%M:00+00:00")


def main(argv: list[str] | None = None) -> int:
    """Write the set; with --check, only say whether the files on disk are what this script
    writes (the test suite runs it so: the committed data always obey the rules above)."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    files: dict[str, str] = {}
    rng = random.Random(SEED)
    memories: list[dict[str, Any]] = []
    by_topic: dict[str, list[dict[str, Any]]] = {}
    controls: list[tuple[str, str]] = []
    for index, (topic, _names, items) in enumerate(TOPICS):
        dates = topic_dates(rng, len(items), index)
        order = list(range(len(items)))
        rng.shuffle(order)
        version = 10
        for n, (d, i) in enumerate(zip(dates, order, strict=True)):
            content, control = items[i]
            version += rng.randint(1, 3)
            content = content.replace("{v}", f"{2 + version // 30}.{version % 30}")
            key = f"{topic}-{n:02d}"
            m = {"key": key, "store": "temporal", "content": content,
                 "project": "hydra" if topic in ("deploy", "slowquery") else None,
                 "category": topic, "created_at": stamp(rng, d)}  # fmt: skip
            if topic in ("flaky", "oncall", "oneonone"):
                m["source_path"] = f"journal/{d.isoformat()}.md"
            memories.append(m)
            by_topic.setdefault(topic, []).append(m)
            controls.append((key, control))
        span = (TODAY - START).days
        seen: set[str] = set()
        while len(seen) < STATUS_PER_TOPIC:
            d = START + timedelta(days=rng.randrange(span + 1))
            version += rng.randint(1, 3)
            p, q = rng.sample(PEOPLE, 2)
            n = rng.randint(2, 19)
            content = STATUS[topic].format(
                v=f"{2 + version // 30}.{version % 30}", n=n, m=rng.randint(1, min(n, 9)),
                r=rng.randint(71, 99), p=p, q=q)  # fmt: skip
            if content in seen:
                continue
            seen.add(content)
            m = {"key": f"{topic}-status-{len(seen):02d}", "store": "temporal",
                 "content": content, "project": "hydra" if topic in ("deploy", "slowquery")
                 else None, "category": topic, "created_at": stamp(rng, d), "grade": 1}  # fmt: skip
            memories.append(m)
            by_topic[topic].append(m)
    chunks: dict[str, int] = {}
    memories.sort(key=lambda m: m["created_at"])
    for m in memories:
        if "source_path" in m:
            m["chunk_index"] = chunks.get(m["source_path"], 0)
            chunks[m["source_path"]] = m["chunk_index"] + 1

    def in_window(m: dict[str, Any], w: tuple[date, date]) -> bool:
        return w[0] <= date.fromisoformat(m["created_at"][:10]) <= w[1]

    queries: list[dict[str, Any]] = []
    exprs = expressions()
    for t_index, (topic, names, _items) in enumerate(TOPICS):
        zh = topic.startswith("zh")
        candidates = []
        for e_index, (en, zh_expr, w) in enumerate(exprs):
            labels = {m["key"]: m.get("grade", 2) for m in by_topic[topic] if in_window(m, w)}
            if 2 in labels.values() and len(labels) < len(by_topic[topic]) // 2:
                candidates.append((e_index, en, zh_expr, w, labels))
        rng.shuffle(candidates)
        for n, (_e, en, zh_expr, w, labels) in enumerate(candidates[:9]):
            name = names[n % len(names)]
            if zh:
                text = f"{zh_expr}{name}有哪些" if n % 2 else f"{zh_expr} {name}"
            elif n % 3 == 0:
                text = f"{name} {en}"
            elif n % 3 == 1:
                text = f"what about {name} {en}?"
            else:
                text = f"{en}, {name}"
            if topic == "auth" and n == 0:
                text = f"how did I fix the auth bug {en}?"
            queries.append({"id": f"time-{topic}-{n:02d}", "store": "temporal", "query": text,
                            "kind": "temporal-zh" if zh else "temporal", "options": {},
                            "relevant": labels, "expression": zh_expr if zh else en,
                            "window": [w[0].isoformat(), w[1].isoformat()]})  # fmt: skip
    # the questions users ask in so many words (issue 12), where the store answers them
    named = {e[0]: e for e in exprs}
    for n, (topic, expr, text) in enumerate([
        ("auth", "last week", "How did I fix the auth bug last week?"),
        ("decision", "last month", "what did we decide last month?"),
        ("decision", "in August", "what did we decide in August?"),
        ("deploy", "yesterday", "what did we deploy yesterday?"),
        ("zh-deploy", "yesterday", "昨天上线了什么"),
        ("zh-bug", "3 days ago", "三天前修复的登录问题"),
        ("zh-bug", "last week", "上周修了哪些登录问题"),
        ("oncall", "this month", "who was on call this month?"),
    ]):  # fmt: skip
        _en, zh_expr, w = named[expr]
        labels = {m["key"]: m.get("grade", 2) for m in by_topic[topic] if in_window(m, w)}
        if 2 in labels.values():
            queries.append({"id": f"time-asked-{n:02d}", "store": "temporal", "query": text,
                            "kind": "temporal-zh" if topic.startswith("zh") else "temporal",
                            "options": {}, "relevant": labels,
                            "expression": zh_expr if topic.startswith("zh") else expr,
                            "window": [w[0].isoformat(), w[1].isoformat()]})  # fmt: skip
    # a few English questions in Chinese time words over English topics (mixed scripts)
    for n, (topic, expr_index) in enumerate([("auth", 1), ("deploy", 3), ("oncall", 3),
                                             ("postmortem", 6), ("release", 6)]):  # fmt: skip
        en, zh_expr, w = exprs[expr_index]
        labels = {m["key"]: m.get("grade", 2) for m in by_topic[topic] if in_window(m, w)}
        if 2 in labels.values():
            queries.append({"id": f"time-mixed-{n:02d}", "store": "temporal",
                            "query": f"{zh_expr} {TOPICS[[t[0] for t in TOPICS].index(topic)][1][0]}",
                            "kind": "temporal-zh", "options": {},
                            "relevant": labels, "expression": zh_expr,
                            "window": [w[0].isoformat(), w[1].isoformat()]})  # fmt: skip
    # "what was I working on <day>": every note of that day
    for n, i in enumerate([1, 2, 11, 12, 13, 16, 17, 18, 19, 32]):
        en, zh_expr, w = exprs[i]
        labels = [m["key"] for m in memories if in_window(m, w)]
        if not labels or w[0] != w[1]:
            continue
        text = f"what was I working on {en}?" if n % 3 else f"what did I do {en}"
        if n == 4:
            text = f"{zh_expr}我做了什么"
        queries.append({"id": f"time-day-{n:02d}", "store": "temporal", "query": text,
                        "kind": "temporal-zh" if n == 4 else "temporal-day", "options": {},
                        "relevant": {k: 2 for k in labels}, "expression": zh_expr if n == 4 else en,
                        "window": [w[0].isoformat(), w[1].isoformat()]})  # fmt: skip
    # controls: one note by its own detail, no time words
    # (without any word a time parser could take for a time expression)
    time_words = re.compile(
        r"\b(yesterday|today|week|month|year|ago|since|before|after|between|last|next|"
        r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|"
        r"april|may|june|july|august|september|october|november|december|q[1-4]|h[12])\b"
        r"|\d{4}-\d\d|昨天|前天|上周|本周|这周|月|天前|季度",
        re.IGNORECASE,
    )
    controls = [(k, t) for k, t in controls if not time_words.search(t)]
    rng.shuffle(controls)
    for n, (key, text) in enumerate(sorted(controls[:64])):
        queries.append({"id": f"control-{n:02d}", "store": "temporal", "query": text,
                        "kind": "control", "options": {}, "relevant": {key: 2}})  # fmt: skip
    for q in queries:
        q["now"] = NOW_ISO
    for m in memories:
        m.pop("grade", None)
    files["memories.jsonl"] = (
        "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in memories)
    )
    files["queries.jsonl"] = (
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    )
    meta = {"name": "temporal", "stores": ["temporal"], "nested": False, "seed": SEED,
            "now": NOW_ISO, "week_starts": "Monday", "timezone": "UTC"}  # fmt: skip
    files["meta.json"] = json.dumps(meta, indent=2) + "\n"
    if check:
        stale = [n for n, text in files.items()
                 if not (HERE / n).exists() or (HERE / n).read_text(encoding="utf-8") != text]
        if stale:
            print(f"{HERE.name}: {stale} differ from what generate.py writes; run it")
        return 1 if stale else 0
    for name, text in files.items():
        (HERE / name).write_text(text, encoding="utf-8")
    print(f"{len(memories)} memories, {len(queries)} queries:",
          dict(Counter(q["kind"] for q in queries)))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
