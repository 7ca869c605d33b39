"""Hand-written seed material of the agent set: the notes an agent keeps for its user.

Six projects share vocabulary on purpose (deploy, staging, database, cache, auth, on-call):
hydra (a payments API), atlas (a map-tiles service), nimbus (the platform: Kubernetes,
Terraform, CI runners), quill (the docs site), ledger (billing batch jobs), orbit (the
mobile app); plus the user's own preferences (project None).

Each note is ``(key, date, project, category, content, extra)`` where `extra` may give a
``session`` id or a ``source`` (a dated journal file; the chunk index is its position among
the notes of that file). Keys are stable: queries label notes by key, never by database id.
"""

from __future__ import annotations

from typing import Any

Note = tuple[str, str, str | None, str, str, dict[str, Any]]

J = "journal/"  # dated markdown notes live under journal/YYYY-MM-DD.md

# --------------------------------------------------------------------------- store of ~30
CORE: list[Note] = [
    ("c01", "2026-06-02", "hydra", "decision",
     "Decided to keep blue-green deploys for hydra: the new build goes to the idle color, "
     "smoke tests run against it, then the load balancer flips. Rollback is flipping back.",
     {"session": "s-hydra-0602"}),
    ("c02", "2026-09-07", "hydra", "oncall",
     "The on-call rotation changes every Monday at 10:00; the handover happens in "
     "#hydra-oncall and the outgoing person writes a summary of open incidents.", {}),
    ("c03", "2026-07-15", "nimbus", "config",
     "Terraform state for nimbus lives in the S3 bucket nimbus-tfstate with DynamoDB locking. "
     "Never run terraform apply from a laptop; the CI job applies after review.", {}),
    ("c04", "2026-08-11", "atlas", "bug",
     "Fixed the atlas tile server returning blank PNGs at zoom 17 and above: the mbtiles "
     "reader used 32-bit offsets, switched to u64.", {"session": "s-atlas-0811"}),
    ("c05", "2026-06-20", "hydra", "config",
     "pgbouncer runs in transaction pooling mode in front of hydra's Postgres: "
     "max_client_conn 2000, default_pool_size 40. Prepared statements must stay disabled "
     "in the driver.", {}),
    ("c06", "2026-10-05", "ledger", "bug",
     "Invoice totals were off by one cent for EUR: rounding happened per line instead of on "
     "the total. Now we round half-even once at the end (LED-311).",
     {"session": "s-ledger-1005"}),
    ("c07", "2026-08-28", "orbit", "decision",
     "Orbit moves push notifications from the legacy GCM endpoint to FCM HTTP v1 before the "
     "October deadline; Priya owns the migration.", {}),
    ("c08", "2026-05-30", None, "preference",
     "I prefer pytest with -x and --ff when iterating locally, and ruff format on save; "
     "no black.", {}),
    ("c09", "2026-07-02", "quill", "meeting",
     "Docs sync with Tomasz: quill will switch its search box from Algolia to Pagefind to "
     "drop the external dependency; final call next sprint.", {}),
    ("c10", "2026-10-19", "hydra", "bug",
     "Auth bug: JWTs were rejected for five minutes after every key rotation because the "
     "JWKS cache TTL was 300s. Fixed by refetching the JWKS when a token has an unknown kid.",
     {"session": "s-hydra-1019"}),
    ("c11", "2026-09-21", "nimbus", "deploy",
     "Staging deploy of the nimbus ingress controller 1.11 failed: the admission webhook "
     "certificate had expired. Renewed it with cert-manager and redeployed to staging.", {}),
    ("c12", "2026-06-09", "ledger", "config",
     "Kafka consumer group ledger-invoicer: max.poll.interval.ms raised to 600000 because "
     "rendering large invoice PDFs took longer than five minutes and caused rebalances.", {}),
    ("c13", "2026-07-20", "atlas", "people",
     "Marta Kowalski is the new tech lead of atlas. She prefers async design docs over "
     "meetings and reviews pull requests in the morning, CET.", {}),
    ("c14", "2026-11-10", "atlas", "deploy",
     "Deployed atlas 4.2 to production with the new vector tile styles; purged the CDN "
     "cache for /styles/*.", {}),
    ("c15", "2026-09-30", "orbit", "bug",
     "iOS crash on launch for users upgrading from 3.x: the Core Data migration had no "
     "mapping model for the Settings entity. Hotfix 4.0.1 went to TestFlight, then the "
     "App Store.", {"session": "s-orbit-0930"}),
    ("c16", "2026-11-16", "hydra", "deploy",
     "Deployed hydra 2.14 to staging only; production waits for the PCI review on Thursday.",
     {}),
    ("c17", "2026-08-04", "hydra", "bug",
     "Spent the morning on flaky integration tests in hydra: parallel workers shared one "
     "test database. Each xdist worker now gets its own schema.", {"source": J}),
    ("c18", "2026-08-04", "ledger", "meeting",
     "Afternoon: walked through the ledger refund flow with Sam. Refunds over 10k EUR need "
     "a second approver.", {"source": J}),
    ("c19", "2026-10-14", "ledger", "config",
     "数据库索引：给 ledger 的 invoices 表在 (customer_id, issued_at) 上加了复合索引，"
     "月度报表查询从 12 秒降到 300 毫秒。", {}),
    ("c20", "2026-09-15", "hydra", "incident",
     "缓存雪崩事故复盘：hydra 的 Redis 缓存大量键在同一时间过期，请求全部打到 Postgres。"
     "解决办法：过期时间加随机抖动，热点键加互斥锁。", {"session": "s-hydra-0915"}),
    ("c21", "2026-08-19", "orbit", "decision",
     "周会决定：orbit 安卓版最低支持 API 26，下个季度起不再支持更旧的系统版本。", {}),
    ("c22", "2026-07-08", "atlas", "bug",
     "atlas のタイル生成バッチが夜間に失敗していた。原因はディスク容量不足。"
     "古いキャッシュを毎週削除する cron を追加した。", {}),
    ("c23", "2026-10-01", "nimbus", "decision",
     "デプロイ手順の見直し：nimbus では本番反映の前に必ずステージングで負荷試験を行う。", {}),
    ("c24", "2026-10-13", "nimbus", "incident",
     "Incident review of Sunday's outage: a bug in the CI runner autoscaler launched 400 spot "
     "instances. Added a hard cap of 60 runners and a billing alarm.", {}),
    ("c25", "2026-06-25", "quill", "bug",
     "Broken links in the quill docs after the move to /v2/: added redirects to _redirects "
     "and the lychee link checker to CI.", {}),
    ("c26", "2026-06-01", None, "preference",
     "Use UTC in every log line and ISO 8601 timestamps; local time only in the UI.", {}),
    ("c27", "2026-10-26", "hydra", "decision",
     "Rate limiting for hydra's public API: a token bucket per API key, 100 requests/s with "
     "a burst of 200, enforced in Envoy rather than in the application.", {}),
    ("c28", "2026-11-18", "ledger", "meeting",
     "Quarter-end close with finance: ledger freezes invoice edits from Nov 28 to Dec 2; "
     "Sam will announce it.", {}),
    ("c29", "2026-09-03", "orbit", "config",
     "Sentry sample rate for orbit is 0.2 in production and 1.0 in beta builds; release "
     "health is on.", {}),
    ("c30", "2026-07-28", "nimbus", "decision",
     "Secrets go in Vault under kv/nimbus/<service>; never commit secrets in .env files.",
     {"session": "s-nimbus-0728"}),
]  # fmt: skip

# --------------------------------------------------------------------------- store of ~300
# Hand-written notes added in the 300 store (on top of CORE).
MORE: list[Note] = [
    # hydra
    ("h01", "2026-06-05", "hydra", "bug",
     "HYD-1042: idempotency keys were compared case-sensitively, so retried payments from the "
     "Android SDK created duplicates. Normalised keys to lowercase.", {}),
    ("h02", "2026-06-16", "hydra", "config",
     "hydra webhooks retry with exponential backoff: 1m, 5m, 30m, 2h, 12h, then dead-letter "
     "queue.", {}),
    ("h03", "2026-07-06", "hydra", "decision",
     "hydra stays on Go 1.22 until the grpc-gateway upgrade lands; no generics refactor "
     "before that.", {}),
    ("h04", "2026-07-22", "hydra", "incident",
     "Stripe webhook signature failures on 2026-07-21: the clock on payments-worker-2 drifted "
     "90 s. Enabled chrony on all workers.", {"session": "s-hydra-0722"}),
    ("h05", "2026-08-13", "hydra", "config",
     "hydra read replicas: reporting queries go to pg-hydra-replica-1 via the REPORTING_DSN "
     "variable; never point them at the primary.", {}),
    ("h06", "2026-08-25", "hydra", "bug",
     "HYD-1187: currency conversion used yesterday's FX rate after midnight UTC because the "
     "rate cache key had no date. Key now includes the date.", {}),
    ("h07", "2026-09-09", "hydra", "people",
     "Dmitri Volkov joined hydra as SRE; he owns the Postgres upgrade to 16 and prefers "
     "Signal over Slack for pages at night.", {}),
    ("h08", "2026-09-24", "hydra", "decision",
     "Postgres 16 upgrade for hydra: logical replication to a new cluster, then a 30-second "
     "write freeze for the switchover. Planned for the week of October 12.", {}),
    ("h09", "2026-10-08", "hydra", "config",
     "statement_timeout is 5s for the hydra API role and 10min for the migration role.", {}),
    ("h10", "2026-11-04", "hydra", "bug",
     "HYD-1301: refunds in JPY were multiplied by 100 because JPY has no minor unit. Use the "
     "ISO 4217 exponent table instead of assuming two decimals.", {"session": "s-hydra-1104"}),
    ("h11", "2026-11-12", "hydra", "meeting",
     "PCI DSS 4.0 readiness meeting: hydra needs quarterly ASV scans and MFA for every "
     "console login by March.", {}),
    ("h12", "2026-06-12", "hydra", "bug",
     "Spent the day on a deadlock in hydra's ledger_entries inserts: two transactions locked "
     "rows in opposite order. Sorted by account id before locking.", {"source": J}),
    ("h13", "2026-06-12", "hydra", "preference",
     "Note to self: write the failing test before touching the payments state machine.",
     {"source": J}),
    # atlas
    ("a01", "2026-06-03", "atlas", "config",
     "atlas tile cache: Varnish in front of the tile server, TTL 7 days for raster tiles and "
     "1 hour for vector styles.", {}),
    ("a02", "2026-06-18", "atlas", "decision",
     "atlas moves from raster to vector tiles (MVT) for the web client; raster stays for the "
     "print export.", {}),
    ("a03", "2026-07-10", "atlas", "bug",
     "ATL-77: labels of Arabic street names rendered left-to-right. Fixed by enabling the "
     "RTL text plugin in MapLibre.", {}),
    ("a04", "2026-08-06", "atlas", "config",
     "The OSM planet import for atlas runs with osm2pgsql --slim and flat nodes on the NVMe "
     "volume; it takes 14 hours.", {}),
    ("a05", "2026-08-31", "atlas", "meeting",
     "Map styles review with design: the dark theme needs higher contrast for water and "
     "parks; Lena will send new hex values.", {}),
    ("a06", "2026-09-17", "atlas", "incident",
     "atlas geocoder returned 502s for 40 minutes: Photon ran out of heap after the index "
     "grew. Raised -Xmx to 12g and added an alert on GC time.", {"session": "s-atlas-0917"}),
    ("a07", "2026-10-21", "atlas", "bug",
     "ATL-102: tiles at the antimeridian were clipped. Split geometries that cross 180 "
     "degrees before tiling.", {}),
    ("a08", "2026-11-02", "atlas", "decision",
     "atlas will serve PMTiles from object storage for the offline bundle instead of "
     "running a tile server for it.", {}),
    ("a09", "2026-07-29", "atlas", "people",
     "Lena Fischer designs the atlas map styles; send her screenshots, not style JSON.", {}),
    ("a10", "2026-09-02", "atlas", "bug",
     "Tile seeding was slow: the seeder requested zoom levels in random order and thrashed the "
     "cache. Seeding now walks tiles in Hilbert curve order.", {"source": J}),
    # nimbus
    ("n01", "2026-06-04", "nimbus", "config",
     "nimbus Kubernetes clusters: prod-eu-1 and prod-us-1 on version 1.29, staging-eu-1 on "
     "1.30 to test upgrades first.", {}),
    ("n02", "2026-06-22", "nimbus", "decision",
     "nimbus adopts Argo CD for GitOps; Helm charts stay, but nobody runs helm upgrade by "
     "hand any more.", {}),
    ("n03", "2026-07-13", "nimbus", "bug",
     "NIM-220: pods stuck in ContainerCreating because the CNI ran out of IPs in the /24 "
     "subnet. Moved node pools to /20 subnets.", {}),
    ("n04", "2026-08-03", "nimbus", "config",
     "CI runners for nimbus use c6i.2xlarge spot instances with a fallback to on-demand; "
     "cache volume 200 GB gp3.", {}),
    ("n05", "2026-08-24", "nimbus", "incident",
     "etcd on prod-eu-1 hit its 2 GB quota and the API server went read-only. Defragmented "
     "and raised the quota to 8 GB.", {"session": "s-nimbus-0824"}),
    ("n06", "2026-09-14", "nimbus", "meeting",
     "Platform guild: we agreed on OpenTelemetry for traces in every service by Q1; Jaeger "
     "gets retired.", {}),
    ("n07", "2026-10-06", "nimbus", "bug",
     "NIM-305: Terraform plan wanted to recreate every security group because of a provider "
     "upgrade that reordered rules. Pinned the AWS provider to 5.31.", {}),
    ("n08", "2026-10-27", "nimbus", "config",
     "Karpenter manages the nimbus node pools now; consolidation is on, and the spot "
     "interruption queue is nimbus-spot-events.", {}),
    ("n09", "2026-11-09", "nimbus", "decision",
     "Backups: Velero snapshots of every namespace nightly, kept 30 days; restore drill on "
     "the first Monday of each month.", {}),
    ("n10", "2026-07-01", "nimbus", "people",
     "Arjun Mehta runs the platform team; he wants an RFC for anything that adds a new "
     "managed service.", {}),
    ("n11", "2026-09-28", "nimbus", "bug",
     "Debugged DNS timeouts in nimbus: ndots 5 made every external lookup try five search "
     "domains. Set ndots to 2 in the pod dnsConfig.", {"source": J}),
    # quill
    ("q01", "2026-06-08", "quill", "config",
     "quill builds with Astro; the docs deploy on every merge to main through Netlify, "
     "preview deploys for pull requests.", {}),
    ("q02", "2026-06-29", "quill", "decision",
     "quill docs are versioned per major release only; minor releases update the current "
     "version in place.", {}),
    ("q03", "2026-07-24", "quill", "bug",
     "QUI-58: code blocks lost their syntax highlighting in dark mode; the Shiki theme was "
     "not switched with the site theme.", {}),
    ("q04", "2026-08-17", "quill", "meeting",
     "Docs retro: the API reference is generated from OpenAPI now, but the examples are "
     "still hand-written; Tomasz wants them tested.", {}),
    ("q05", "2026-09-08", "quill", "config",
     "The quill docs are served with a Content-Security-Policy that allows scripts from "
     "self only; the Pagefind bundle is self-hosted for that reason.", {}),
    ("q06", "2026-10-12", "quill", "bug",
     "Search results in the quill docs showed stale pages because Pagefind indexed the "
     "previous build; the index step now runs after the build step.", {}),
    ("q07", "2026-11-05", "quill", "people",
     "Tomasz Nowak maintains the quill docs; he is away from Dec 20 to Jan 6.", {}),
    ("q08", "2026-07-16", "quill", "preference",
     "For docs screenshots use the light theme at 1280x800 and crop to the relevant panel.",
     {}),
    # ledger
    ("l01", "2026-06-01", "ledger", "decision",
     "ledger generates invoice PDFs with WeasyPrint instead of wkhtmltopdf, which is "
     "unmaintained.", {}),
    ("l02", "2026-06-23", "ledger", "bug",
     "LED-240: the nightly dunning job sent reminders for invoices already paid by bank "
     "transfer because reconciliation ran after it. Swapped the order in the scheduler.",
     {}),
    ("l03", "2026-07-14", "ledger", "config",
     "ledger batch jobs run on Airflow; the invoice DAG starts at 02:00 UTC and must finish "
     "before 06:00 for the EU morning.", {}),
    ("l04", "2026-08-10", "ledger", "incident",
     "Kafka consumer lag on ledger-invoicer reached 2 million messages after a broker "
     "restart; scaled consumers to 12 partitions' worth and it drained in 40 minutes.",
     {"session": "s-ledger-0810"}),
    ("l05", "2026-09-01", "ledger", "decision",
     "VAT rates come from a table keyed by country and date, never hard-coded; finance "
     "updates it through the admin UI.", {}),
    ("l06", "2026-09-22", "ledger", "bug",
     "LED-288: credit notes were numbered from the invoice sequence, leaving gaps that "
     "auditors flagged. Credit notes now have their own sequence per year.", {}),
    ("l07", "2026-10-20", "ledger", "people",
     "Sam Okafor is the finance contact for ledger; ask Sam before changing anything that "
     "touches revenue recognition.", {}),
    ("l08", "2026-11-11", "ledger", "config",
     "The ledger S3 bucket for invoice archives has object lock in compliance mode, 10 year "
     "retention.", {}),
    ("l09", "2026-07-27", "ledger", "meeting",
     "Reviewed the year-end checklist with Sam: export the trial balance, lock periods, "
     "archive the audit log.", {"source": J}),
    # orbit
    ("o01", "2026-06-10", "orbit", "config",
     "orbit uses React Native 0.74 with the new architecture enabled; Hermes on both "
     "platforms.", {}),
    ("o02", "2026-07-03", "orbit", "bug",
     "ORB-133: the Android app drained battery because location updates stayed on in the "
     "background. Switched to significant-change updates.", {}),
    ("o03", "2026-07-23", "orbit", "decision",
     "orbit login: passkeys first, email magic link as fallback; passwords are gone from "
     "the new sign-up.", {}),
    ("o04", "2026-08-14", "orbit", "people",
     "Priya Raman leads mobile at orbit; she does the App Store submissions and wants "
     "release notes by Wednesday.", {}),
    ("o05", "2026-09-10", "orbit", "bug",
     "ORB-161: deep links opened the home screen instead of the order page on cold start "
     "because the navigation container mounted after the link event.", {}),
    ("o06", "2026-10-09", "orbit", "incident",
     "orbit sign-in outage for 25 minutes: the OAuth redirect URI changed in the identity "
     "provider config but not in the app. Rolled the config back.", {"session": "s-orbit-1009"}),
    ("o07", "2026-10-30", "orbit", "config",
     "orbit feature flags live in Unleash; the mobile SDK polls every 60 s and caches "
     "flags for offline starts.", {}),
    ("o08", "2026-11-13", "orbit", "meeting",
     "Release planning: orbit 4.3 ships the order tracking map (atlas tiles) behind a "
     "flag; code freeze Nov 25.", {}),
    # personal
    ("p01", "2026-06-15", None, "preference",
     "Commit messages: imperative mood, say why in the body, reference the ticket at the "
     "end.", {}),
    ("p02", "2026-07-09", None, "preference",
     "I review pull requests in two passes: design first, then line comments; never both at "
     "once.", {}),
    ("p03", "2026-08-20", None, "preference",
     "Keep meeting-free mornings on Tuesday and Thursday for deep work.", {}),
    ("p04", "2026-09-16", None, "learning",
     "Learned: EXPLAIN (ANALYZE, BUFFERS) shows shared hits vs reads; a high read count "
     "means the working set does not fit in shared_buffers.", {}),
    ("p05", "2026-10-15", None, "learning",
     "Learned: Go's http.Client has no timeout by default; always set Timeout or use a "
     "context deadline.", {}),
    ("p06", "2026-11-06", None, "preference",
     "Editor: Neovim with the LSP for Go and Python; tabs shown as 4 spaces.", {}),
    # CJK (Chinese, Japanese, mixed scripts)
    ("z01", "2026-06-17", "hydra", "decision",
     "讨论结果：hydra 的退款接口必须幂等，客户端重试时带上同一个 Idempotency-Key。", {}),
    ("z02", "2026-07-19", "ledger", "bug",
     "修复了发票 PDF 中文字体缺失的问题：WeasyPrint 容器里安装 Noto Sans CJK 字体。", {}),
    ("z03", "2026-08-26", "nimbus", "config",
     "日志保留策略：nimbus 的应用日志在 Loki 中保留 14 天，审计日志保留一年。", {}),
    ("z04", "2026-09-29", "orbit", "meeting",
     "和产品经理开会：orbit 的订单追踪页要显示骑手的实时位置，每 10 秒刷新一次。", {}),
    ("z05", "2026-10-23", "atlas", "bug",
     "地图瓦片在高缩放级别加载很慢，原因是 CDN 没有缓存 404 响应，导致大量回源请求。", {}),
    ("z06", "2026-11-17", "hydra", "oncall",
     "值班交接：本周 hydra 值班是 Dmitri，未解决的问题是支付回调偶尔超时。", {}),
    ("z07", "2026-06-26", "quill", "decision",
     "quill のドキュメントは日本語版も用意する。翻訳は Crowdin で管理する。", {}),
    ("z08", "2026-08-07", "hydra", "bug",
     "hydra の決済 API でタイムアウトが多発。原因はコネクションプールの枯渇。"
     "pgbouncer のプールサイズを増やして解決。", {}),
    ("z09", "2026-09-18", "orbit", "config",
     "orbit のプッシュ通知は FCM 経由で送る。iOS は APNs の認証キーを使う。", {}),
    ("z10", "2026-10-28", "nimbus", "incident",
     "nimbus の本番クラスタで証明書の期限切れによる障害が発生。cert-manager の"
     "自動更新が止まっていた。", {}),
    ("z11", "2026-11-19", "atlas", "meeting",
     "atlas 的 Q1 计划：上线离线地图包，支持 PMTiles 格式。", {}),
    ("z12", "2026-07-31", "ledger", "config",
     "ledger 的 Airflow 任务失败时发邮件给 finance-alerts@，同时在 Slack 频道 #ledger-ops 告警。",
     {}),
]  # fmt: skip

# People and services the generated notes draw from. Generated notes are routine log lines:
# every queried fact lives in CORE or MORE.
PEOPLE = ["Priya", "Dmitri", "Marta", "Sam", "Tomasz", "Lena", "Arjun", "Kenji", "Wei",
          "Aisha", "Jonas", "Chloé", "Mateo", "Yuki", "Olu", "Ines"]  # fmt: skip
SERVICES = {
    "hydra": ["hydra-api", "hydra-worker", "hydra-webhooks"],
    "atlas": ["atlas-tiles", "atlas-geocoder", "atlas-styles"],
    "nimbus": ["nimbus-ingress", "nimbus-runner-autoscaler", "nimbus-argo"],
    "quill": ["quill-site", "quill-search"],
    "ledger": ["ledger-invoicer", "ledger-dunning", "ledger-reports"],
    "orbit": ["orbit-bff", "orbit-push"],
}
