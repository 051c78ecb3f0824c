"""The report page's Jinja2 template (autoescaped; charts and the graph come in as SVG markup).

Kept as a module constant rather than a file so the library zip shipped to Spark executors and the
installed package carry it without package-data rules. The CSS is inline and there is no script:
the page must open with no network and no JavaScript (an e-mail attachment, a file:// link, the
Airflow page). `<!-- statekeeper:nav -->` is where the Airflow page puts its run picker.
"""

PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="statekeeper-report-run" content="{{ d.run_id }}">
<title>Statekeeper report · {{ d.run_id }}</title>
<style>
 body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 24px 48px; color: #1d2330; }
 h1 { font-size: 22px; margin: 18px 0 4px; } h2 { font-size: 17px; margin: 30px 0 6px; border-bottom: 1px solid #dde; padding-bottom: 3px; }
 .meta, .src { color: #667; font-size: 12px; } .src code { font-size: 11px; }
 .cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
 .card { border: 1px solid #dde; border-radius: 6px; padding: 8px 12px; min-width: 130px; }
 .card b { display: block; font-size: 19px; } .card.bad { border-color: #c62828; background: #fdecec; }
 table { border-collapse: collapse; margin: 6px 0; font-size: 13px; }
 th, td { border-bottom: 1px solid #eef; padding: 3px 8px; text-align: left; vertical-align: top; }
 th { background: #f4f5fa; } td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
 tr.unrestorable td { background: #fdecec; } tr.unrestorable td.flag { color: #b71c1c; font-weight: bold; }
 tr.total td { font-weight: bold; border-top: 2px solid #ccd; }
 .flag.ok { color: #2e7d32; } .flag.unknown { color: #777; }
 .rpo { white-space: nowrap; } .rpo svg { vertical-align: middle; margin-left: .4em; }
 .notes { background: #fff8e1; border: 1px solid #f0d48a; padding: 6px 12px; border-radius: 6px; }
 code { font-size: 12px; word-break: break-all; } svg { max-width: 100%; height: auto; }
 #lineage svg g.node[data-restorable="false"] text { font-weight: bold; }
 .legend span { display: inline-block; padding: 0 6px; margin-right: 6px; border-radius: 3px; }
</style>
</head>
<body>
<!-- statekeeper:nav -->
<h1>Statekeeper report</h1>
<div class="meta">run <code>{{ d.run_id }}</code>{% if d.airflow_run_id %} (Airflow run <code>{{ d.airflow_run_id }}</code>){% endif %} · generated {{ d.generated_at | when }} · warehouse <code>{{ d.warehouse }}</code>
 · index run <code>{{ d.index_run_id }}</code>{% if d.validation_run_id %} · validation run <code>{{ d.validation_run_id }}</code>{% endif %}</div>
<div class="src">Tables read (Delta versions): {% for t, v in d.versions | dictsort %}<code>{{ t }}</code> v{{ v }}{% if not loop.last %}, {% endif %}{% endfor %}.
 Hover a number for the table and filter it comes from.</div>
{% if d.notes %}<div class="notes"><ul>{% for n in d.notes %}<li>{{ n }}</li>{% endfor %}</ul></div>{% endif %}

<div class="cards" id="summary">
 <div class="card" title="{{ src('files', 'sum(size) over every listed object') }}">stored<b>{{ d.totals.total_bytes | size }}</b>{{ d.totals.files | num }} objects in {{ d.totals.directories | num }} directories</div>
 <div class="card" title="{{ src('references', 'distinct files of a directory referenced by snapshots of another directory, sized from files') }}">pinned by other jobs<b>{{ d.totals.pinned_bytes | size }}</b></div>
 <div class="card" title="{{ src('gc_actions', 'size of the newest GC plan\'s rows with outcome = planned') }}">reclaimable (GC plan)<b>{{ d.totals.reclaimable_bytes | size }}</b></div>
 <div class="card" title="{{ src('snapshots', 'sum(inline_bytes)') }}">inline in _metadata<b>{{ d.totals.inline_bytes | size }}</b>{{ d.totals.snapshots | num }} snapshots</div>
 <div class="card{% if d.jobs_unrestorable %} bad{% endif %}" id="card-unrestorable" title="{{ src('validation_jobs', 'kind = job and newest_restorable = false') }}">jobs not restorable<b>{{ d.jobs_unrestorable | num }}</b>of {{ d.jobs | num }} validated</div>
 {% if d.gc %}<div class="card" title="{{ src('gc_runs', 'newest row of run ' ~ d.gc.run_id) }}">GC {{ d.gc.mode }} · {{ d.gc.status }}<b>{{ d.gc.deleted_bytes | size }} freed</b>{{ d.gc.planned_bytes | size }} planned</div>{% endif %}
 <div class="card" title="{{ src('dr_copies', 'distinct (source_root, job_dir) with status = verified') }}">with a verified DR copy<b>{{ d.dr_verified_jobs | num }}</b>directories</div>
</div>

<h2 id="storage">Where the storage goes</h2>
<div class="src">From <code>files</code> grouped by root and job directory; pinned from <code>references</code> (distinct files another directory's snapshots use);
 reclaimable from <code>gc_actions</code> ({% if d.gc %}plan <code>{{ d.gc.plan_run_id }}</code>, outcome planned{% else %}no GC run yet{% endif %}); inline from <code>snapshots.inline_bytes</code>.
 The {{ d.storage | length }} largest of {{ d.totals.directories | num }} directories.</div>
{{ charts.storage | safe }}
<table id="storage-table">
<tr><th>root</th><th>directory</th><th>objects</th><th>stored</th><th>own</th><th>pinned by others</th><th>reclaimable</th><th>inline</th><th>snapshots</th></tr>
{% for r in d.storage %}{% set w = "root = '" ~ r.root ~ "' and job_dir = '" ~ r.job_dir ~ "'" %}
<tr data-job-dir="{{ r.job_dir }}"><td><code>{{ r.root }}</code></td><td><code>{{ r.job_dir }}</code></td>
 <td class="n" title="{{ src('files', 'count(*) where ' ~ w) }}">{{ r.files | num }}</td>
 <td class="n" data-bytes="{{ r.total_bytes }}" title="{{ src('files', 'sum(size) where ' ~ w) }}">{{ r.total_bytes | size }}</td>
 <td class="n" title="stored − pinned − reclaimable">{{ r.own_bytes | size }}</td>
 <td class="n" data-bytes="{{ r.pinned_bytes }}" title="{{ src('references', 'distinct file_uri where file_root = \'' ~ r.root ~ '\' and file_job_dir = \'' ~ r.job_dir ~ '\' and the snapshot is in another directory; size from files') }}">{{ r.pinned_bytes | size }} ({{ r.pinned_files | num }})</td>
 <td class="n" data-bytes="{{ r.reclaimable_bytes }}" title="{{ src('gc_actions', 'sum(size) where outcome = planned and ' ~ w) }}">{{ r.reclaimable_bytes | size }} ({{ r.reclaimable_files | num }})</td>
 <td class="n" data-bytes="{{ r.inline_bytes }}" title="{{ src('snapshots', 'sum(inline_bytes) where ' ~ w) }}">{{ r.inline_bytes | size }}</td>
 <td class="n" title="{{ src('snapshots', 'count(*) where ' ~ w) }}">{{ r.snapshots | num }}</td></tr>
{% endfor %}
{% if others.directories %}<tr class="others"><td colspan="2">{{ others.directories | num }} other directories</td><td class="n">{{ others.files | num }}</td><td class="n">{{ others.total_bytes | size }}</td><td></td>
 <td class="n">{{ others.pinned_bytes | size }}</td><td class="n">{{ others.reclaimable_bytes | size }}</td><td class="n">{{ others.inline_bytes | size }}</td><td class="n">{{ others.snapshots | num }}</td></tr>{% endif %}
<tr class="total"><td colspan="2">all {{ d.totals.directories | num }} directories</td><td class="n">{{ d.totals.files | num }}</td><td class="n">{{ d.totals.total_bytes | size }}</td><td class="n">{{ d.totals.own_bytes | size }}</td>
 <td class="n">{{ d.totals.pinned_bytes | size }}</td><td class="n">{{ d.totals.reclaimable_bytes | size }}</td><td class="n">{{ d.totals.inline_bytes | size }}</td><td class="n">{{ d.totals.snapshots | num }}</td></tr>
</table>
<h3>Trend</h3>
<div class="src">The last {{ d.trend | length }} report runs (<code>report_runs</code>: bytes_total, bytes_pinned, bytes_reclaimable, bytes_inline), this one last.</div>
{{ charts.trend | safe }}

<h2 id="lineage-section">Which jobs keep which other jobs' files alive</h2>
<div class="src">From <code>references</code>: an arrow from a directory to the one whose files its snapshots use (A ← B: B uses A's files), with the distinct files and bytes.
 {{ d.lineage_edges | length }} heaviest of {{ d.lineage_edge_count | num }} cross-directory edges ({{ d.lineage_edge_bytes | size }} in all).
 <span class="legend"><span style="background:#d9f2d9">restorable</span><span style="background:#f8d0d0">newest checkpoint not restorable</span><span style="background:#eee">not validated</span></span></div>
<div id="lineage">{% if lineage_svg %}{{ lineage_svg | safe }}{% elif d.lineage_edges %}<p class="notes">{{ lineage_error }}</p>{% else %}<p>No directory uses another directory's files.</p>{% endif %}</div>
{% if d.lineage_edges %}<table id="edges"><tr><th>directory</th><th>uses files of</th><th>files</th><th>bytes</th></tr>
{% for e in d.lineage_edges %}<tr><td><code>{{ e.job_dir }}</code></td><td><code>{{ e.target_job_dir }}</code></td>
 <td class="n" title="{{ src('references', 'count(distinct file_uri) where root = \'' ~ e.root ~ '\' and job_dir = \'' ~ e.job_dir ~ '\' and file_root = \'' ~ e.target_root ~ '\' and file_job_dir = \'' ~ e.target_job_dir ~ '\'') }}">{{ e.files | num }}</td>
 <td class="n" data-bytes="{{ e.bytes }}" title="sizes of those files in files">{{ e.bytes | size }}</td></tr>{% endfor %}</table>{% endif %}

<h2 id="health-section">Does every job's newest checkpoint restore?</h2>
<div class="src">From <code>validation_jobs</code> (newest checkpoint, latest restorable), failing checks from <code>validation_results</code> (severity = error on the newest snapshot), last verified copy from <code>dr_copies</code> (status = verified); RPO: the age of the newest source checkpoint a verified copy holds, what a failover now would lose; the line: each of the last copies' lag, from completion at the source to its <code>_metadata</code> at the target.
 {% if d.jobs_not_validated %}<b>{{ d.jobs_not_validated | num }} directories with snapshots have no validation row</b> (validate after the newest index run).{% endif %}
 {% if d.health | length < d.jobs %}Not restorable first, then the largest; {{ d.health | length }} of {{ d.jobs | num }}.{% endif %}</div>
{% if d.health %}<table id="health">
<tr><th>directory</th><th>kind</th><th>job id</th><th>newest checkpoint</th><th>restorable</th><th>failing checks</th><th>latest restorable</th><th>last verified DR copy, RPO and lag trend</th></tr>
{% for h in d.health %}<tr data-job-dir="{{ h.job_dir }}" data-restorable="{{ restorable(h.newest_restorable) }}"{% if h.newest_restorable == false %} class="unrestorable"{% endif %}>
 <td><code>{{ h.job_dir }}</code></td><td>{{ h.kind }}</td><td><code>{{ h.job_id or '' }}</code></td>
 <td title="{{ h.newest_uri or '' }}">{{ h.newest_checkpoint_id if h.newest_checkpoint_id is not none else '' }}</td>
 <td class="flag {{ 'ok' if h.newest_restorable else ('unknown' if h.newest_restorable is none else 'bad') }}" title="{{ src('validation_jobs', 'newest_restorable where root = \'' ~ h.root ~ '\' and job_dir = \'' ~ h.job_dir ~ '\'') }}">{{ 'yes' if h.newest_restorable else ('unknown' if h.newest_restorable is none else 'NO') }}</td>
 <td>{{ h.failing_checks | join(', ') }}</td>
 <td title="{{ h.latest_restorable_uri or '' }}">{{ h.latest_restorable_checkpoint_id if h.latest_restorable_checkpoint_id is not none else ('none' if h.newest_uri else '') }}</td>
 <td>{% if h.last_dr_copy %}{{ h.last_dr_copy.finished_at | when }} (chk {{ h.last_dr_copy.checkpoint_id }}){% if h.last_dr_copy.rpo_seconds is not none %}
 <br><span class="rpo" data-rpo-seconds="{{ h.last_dr_copy.rpo_seconds | round(1) }}" title="{{ src('dr_copies', 'now - max(source_completed_at) where status = \'verified\' and source_root = \'' ~ h.root ~ '\' and job_dir = \'' ~ h.job_dir ~ '\'') }}">RPO {{ h.last_dr_copy.rpo_seconds | age }}</span>{{ lag_spark(h.last_dr_copy.lags) | safe }}{% endif %}{% endif %}</td></tr>
{% endfor %}</table>{% else %}<p>No validation run yet: run the <code>validate</code> task.</p>{% endif %}

<h2 id="metadata-section"><code>_metadata</code> size and inline state</h2>
<div class="src">From <code>snapshots</code> (metadata_size, inline_bytes) for the {{ d.limits.get('metadata_jobs', 0) }} jobs with the largest <code>_metadata</code>, their newest checkpoints; operators from <code>inline_state</code> summed over retained snapshots.</div>
{{ charts.metadata | safe }}
{% if d.operators %}<table id="operators"><tr><th>directory</th><th>operator</th><th>snapshots</th><th>inline bytes (all snapshots)</th><th>largest in one snapshot</th></tr>
{% for o in d.operators %}<tr><td><code>{{ o.job_dir }}</code></td><td>{{ o.operator }}</td><td class="n">{{ o.snapshots | num }}</td>
 <td class="n" data-bytes="{{ o.inline_bytes }}" title="{{ src('inline_state', 'sum(inline_bytes) where job_dir = \'' ~ o.job_dir ~ '\' and operator_id = \'' ~ (o.operator_id or '') ~ '\'') }}">{{ o.inline_bytes | size }}</td>
 <td class="n">{{ o.max_snapshot_inline_bytes | size }}</td></tr>{% endfor %}</table>{% endif %}

<h2 id="gc-section">Garbage collection</h2>
{% if d.gc %}<div class="src">From <code>gc_runs</code> (newest row of run <code>{{ d.gc.run_id }}</code>) and <code>gc_actions</code> where run_id = '{{ d.gc.plan_run_id }}', grouped by reason and outcome.</div>
<p id="gc-summary">Run <code>{{ d.gc.run_id }}</code> ({{ d.gc.mode }}, {{ d.gc.status }}, {{ d.gc.finished_at | when }}):
 planned <b data-count="{{ d.gc.planned }}">{{ d.gc.planned | num }}</b> files ({{ d.gc.planned_bytes | size }}), deleted <b data-count="{{ d.gc.deleted }}">{{ d.gc.deleted | num }}</b> ({{ d.gc.deleted_bytes | size }}),
 already gone {{ d.gc.already_gone | num }}, changed and skipped {{ d.gc.changed_skipped | num }}, failed <b data-count="{{ d.gc.failed }}">{{ d.gc.failed | num }}</b>.
 {% if d.gc.blocked %}<br><b>Blocked:</b> {{ d.gc.blocked | join('; ') }}{% endif %}</p>
{% if d.gc.outcomes %}<table id="gc-outcomes"><tr><th>reason</th><th>outcome</th><th>files</th><th>bytes</th></tr>
{% for o in d.gc.outcomes %}<tr data-reason="{{ o.reason }}" data-outcome="{{ o.outcome }}"><td>{{ o.reason }}</td><td>{{ o.outcome }}</td>
 <td class="n" data-count="{{ o.files }}" title="{{ src('gc_actions', 'count(*) where run_id = \'' ~ d.gc.plan_run_id ~ '\' and reason = \'' ~ o.reason ~ '\' and outcome = \'' ~ o.outcome ~ '\'') }}">{{ o.files | num }}</td>
 <td class="n">{{ o.bytes | size }}</td></tr>{% endfor %}</table>{% endif %}
{% if d.gc.ownerless %}<h3 id="gc-ownerless-heading">Ownerless job directories</h3>
<div class="src">From <code>gc_runs.ownerless</code> (newest row of run <code>{{ d.gc.run_id }}</code>): job directories with data files and no snapshot under the run's roots. A job in a root the run was not given may restore from them (CLAIM/LEGACY); held-back files are not deleted unless the run is told its roots are complete (docs/gc.md, "Which roots a GC run must be given").</div>
<table id="gc-ownerless"><tr><th>directory</th><th>unreferenced files</th><th>bytes</th><th>verdict</th></tr>
{% for o in d.gc.ownerless %}<tr data-ownerless-dir="{{ o.job_dir }}" data-verdict="{{ o.verdict }}"><td>{{ o.root }}/{{ o.job_dir }}</td>
 <td class="n" data-count="{{ o.files }}" title="{{ src('gc_runs', 'ownerless[job_dir = \'' ~ o.job_dir ~ '\'].files of run ' ~ d.gc.run_id) }}">{{ o.files | num }}</td>
 <td class="n" data-bytes="{{ o.bytes }}">{{ o.bytes | size }}</td><td>{{ o.verdict | replace('_', ' ') }}</td></tr>{% endfor %}</table>{% endif %}
{% if d.gc.claimable %}<h3 id="gc-claimable-heading">Claimable tails</h3>
<div class="src">From <code>gc_runs.claimable</code> (newest row of run <code>{{ d.gc.run_id }}</code>): per job its unreferenced files written after its newest retained checkpoint that no failed checkpoint explains (and the unreferenced files of an inactive job's newest ForSt databases). A job in a root the run was not given may have been restored in CLAIM mode from a newer checkpoint of this job that Flink has deleted since, and still read them; held-back files are not deleted unless the run is told its roots are complete (docs/gc.md, "Claimable tails").</div>
<table id="gc-claimable"><tr><th>directory</th><th>unreferenced files</th><th>bytes</th><th>verdict</th></tr>
{% for o in d.gc.claimable %}<tr data-claimable-dir="{{ o.job_dir }}" data-verdict="{{ o.verdict }}"><td>{{ o.root }}/{{ o.job_dir }}</td>
 <td class="n" data-count="{{ o.files }}" title="{{ src('gc_runs', 'claimable[job_dir = \'' ~ o.job_dir ~ '\'].files of run ' ~ d.gc.run_id) }}">{{ o.files | num }}</td>
 <td class="n" data-bytes="{{ o.bytes }}">{{ o.bytes | size }}</td><td>{{ o.verdict | replace('_', ' ') }}</td></tr>{% endfor %}</table>{% endif %}
{% if d.gc.forst %}<h3 id="gc-forst-heading">ForSt databases in checkpoint storage</h3>
<div class="src">From <code>gc_runs.forst</code> (newest row of run <code>{{ d.gc.run_id }}</code>): per job directory its ForSt databases (<code>shared/op_*_attempt_*/</code>), how many can no longer be written (the job wrote nothing for the grace period, and a newer attempt of the subtask exists or the job is inactive by <code>--inactive-after</code>), the unreferenced bytes of those (dead databases: reclaimed, reason <code>dead_database</code>) and of the others (left alone as possibly live) (docs/flink2.md, "ForSt databases").</div>
<table id="gc-forst"><tr><th>directory</th><th>databases</th><th>dead</th><th>stored</th><th>dead-database bytes</th><th>left alone</th></tr>
{% for f in d.gc.forst %}<tr data-forst-dir="{{ f.job_dir }}"><td>{{ f.root }}/{{ f.job_dir }}</td><td class="n">{{ f.databases | num }}</td><td class="n">{{ f.dead_databases | num }}</td>
 <td class="n">{{ f.bytes | size }}</td>
 <td class="n" data-dead-bytes="{{ f.dead_bytes }}" title="{{ src('gc_runs', 'forst[job_dir = \'' ~ f.job_dir ~ '\'].dead_bytes of run ' ~ d.gc.run_id) }}">{{ f.dead_bytes | size }} ({{ f.dead_files | num }} files)</td>
 <td class="n" data-unjudged-bytes="{{ f.unjudged_bytes }}">{{ f.unjudged_bytes | size }} ({{ f.unjudged_files | num }} files)</td></tr>{% endfor %}</table>{% endif %}
{% else %}<p>No GC run yet.</p>{% endif %}

<h2 id="idle-section">Idle job directories</h2>
<div class="src">From <code>files</code>, <code>snapshots</code> and <code>references</code>: job directories with no checkpoint newer than {{ d.idle_before | when }} (none left: no object newer), e.g. left behind when the Kubernetes operator redeploys a job under a new job id, and the job directories whose retained snapshots still use their files. The GC's <code>--inactive-after</code> reclaims what nothing uses. The {{ d.idle_jobs | length }} largest of {{ d.idle_count | num }} ({{ d.idle_bytes | size }}).</div>
{% if d.idle_jobs %}<table id="idle-jobs"><tr><th>directory</th><th>last written</th><th>objects</th><th>stored</th><th>used by</th></tr>
{% for i in d.idle_jobs %}<tr data-idle-dir="{{ i.job_dir }}"><td>{{ i.root }}/{{ i.job_dir }}</td><td>{% if i.newest_checkpoint %}{{ i.newest_checkpoint | when }}{% else %}no checkpoint; {{ i.newest_object | when }}{% endif %}</td>
 <td class="n">{{ i.files | num }}</td><td class="n" data-bytes="{{ i.bytes }}">{{ i.bytes | size }}</td>
 <td>{% for p in i.pinned_by %}<div data-pinner="{{ p.job_dir }}" data-live="{{ 'true' if p.live else 'false' }}">{{ 'live' if p.live else 'idle' }} <code>{{ p.job_dir }}</code>: {{ p.files | num }} files, {{ p.bytes | size }}</div>{% else %}nothing{% endfor %}</td></tr>{% endfor %}</table>
{% else %}<p>None.</p>{% endif %}

<h2 id="dr-section">Disaster-recovery copies</h2>
{% if d.dr %}<p>Newest run <code>{{ d.dr.run_id }}</code> ({{ d.dr.mode }}, {{ d.dr.status }}, {{ d.dr.finished_at | when }}, <code>dr_runs</code>): {{ d.dr.verified | num }} of {{ d.dr.snapshots | num }} snapshots verified, {{ d.dr.failed | num }} failed, {{ d.dr.bytes_copied | size }} copied.
 {% if d.dr.problems %}<br>Problems: {{ d.dr.problems | join('; ') }}{% endif %}</p>{% else %}<p>No DR copy run yet (the <code>checkpoint_dr_copy</code> DAG writes them).</p>{% endif %}

<h2 id="compaction-section">Compaction</h2>
{% if d.compaction %}<p>Newest run <code>{{ d.compaction.run_id }}</code> ({{ d.compaction.mode }}, {{ d.compaction.status }}, {{ d.compaction.finished_at | when }}, <code>compaction_runs</code>):
 {{ d.compaction.selected | num }} selected, {{ d.compaction.compacted | num }} compacted, {{ d.compaction.failed | num }} failed; <code>_metadata</code> {{ d.compaction.metadata_bytes_before | size }} → {{ d.compaction.metadata_bytes_after | size }}.
 {% if d.compaction.statuses %}By status (<code>compactions</code>): {% for k, v in d.compaction.statuses | dictsort %}{{ k }} {{ v }}{% if not loop.last %}, {% endif %}{% endfor %}.{% endif %}
 {% if d.compaction.problems %}<br>Problems: {{ d.compaction.problems | join('; ') }}{% endif %}</p>{% else %}<p>No compaction run yet (off unless enabled).</p>{% endif %}
</body>
</html>
"""
