# miniLST as a ReFrame test (ReFrame 4.x), written from the same RESULT line and the same per-system
# references as the JUBE benchmark (benchmarks/jube/). A starting point for sites that use ReFrame;
# docs/procurement.md says what it checks. ReFrame is not packaged for Debian: miniLST's tests run this
# file's hooks under a stand-in for the ReFrame API it uses (tests/analysis/reframe_check.py), with
# ReFrame's rule for finding a reference, and prove that a figure below its reference fails.
#
#   reframe -C <your site config> -c benchmarks/reframe/minilst_check.py -r \
#           -S minilst_root=$PWD -S minilst=$PWD/build/minilst
#
# One test per shipped deck x point (RANKS:LAYOUT). Sanity: the RESULT line says VALID (the run is
# complete, every loss finite, the deck's reference answer reproduced). Performance: FOM, tokens/s per
# rank, against benchmarks/jube/references.tsv where it lists the system (ReFrame's system name), at
# -tolerance below the reference and no upper bound. The reference is keyed by the system alone:
# ReFrame looks a performance variable up as 'system:partition', then 'system', then '*' (its scoped
# reference dictionary), so a key such as 'system:*' is never found and nothing would be checked.
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, performance_function, run_after, run_before, sanity_function, variable

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT = r'^RESULT: (?P<verdict>VALID|INVALID|INCOMPLETE)\b.* FOM=(?P<fom>\S+) tokens/s/rank'
LAYOUT_SETS = {  # RANKS -> deck keys, as benchmarks/jube/minilst.yaml sets them (D = 1)
    'local': lambda n: ['parallel.ulysses=1', 'parallel.ring=1'],
    'ulysses': lambda n: [f'parallel.ulysses={n}', 'parallel.ring=1'],
    'ring': lambda n: ['parallel.ulysses=1', f'parallel.ring={n}'],
    'hybrid': lambda n: ['parallel.ulysses=2', f'parallel.ring={max(n // 2, 1)}'],
}


def read_references(path):
    """(system, deck, ranks, layout) -> (fom, tolerance) from references.tsv (check_result.py's format)."""
    refs = {}
    if os.path.isfile(path):
        with open(path) as f:
            for line in f:
                words = line.split('#', 1)[0].split()
                if len(words) >= 6:
                    refs[(words[0], words[1], int(words[2]), words[3])] = (float(words[4]), float(words[5]))
    return refs


@rfm.simple_test
class MiniLSTCheck(rfm.RunOnlyRegressionTest):
    descr = 'miniLST: a shipped deck on RANKS ranks in a layout; VALID, FOM against the system reference'
    valid_systems = ['*']
    valid_prog_environs = ['*']
    deck = parameter(['default', 'scaling_cpu', 'step_cpu', 'offload_cpu', 'long_context_cpu'])
    point = parameter(['1:local', '2:ulysses', '2:ring', '4:hybrid'])
    minilst_root = variable(str, value=os.path.dirname(os.path.dirname(HERE)))
    minilst = variable(str, value='minilst')
    tier = variable(str, value='baseline')
    references_file = variable(str, value=os.path.join(HERE, '..', 'jube', 'references.tsv'))
    num_cpus_per_task = 1
    tags = {'minilst', 'procurement'}

    @run_after('init')
    def set_point(self):
        ranks, self.layout = self.point.split(':')
        self.num_tasks = int(ranks)

    @run_before('run')
    def set_command(self):
        self.executable = self.minilst
        sets = LAYOUT_SETS[self.layout](self.num_tasks) + [f'run.tier={self.tier}', 'output.metrics=metrics.h5']
        self.executable_opts = ['run', os.path.join(self.minilst_root, 'inputs', f'{self.deck}.yaml')]
        for s in sets:
            self.executable_opts += ['--set', s]
        self.keep_files = ['metrics.h5', 'metrics.json']

    @run_before('performance')
    def set_reference(self):
        system = self.current_system.name
        ref = read_references(self.references_file).get((system, self.deck, self.num_tasks, self.layout))
        if ref:
            self.reference = {system: {'fom': (ref[0], -ref[1], None, 'tokens/s/rank')}}

    @sanity_function
    def result_is_valid(self):
        return sn.assert_eq(sn.extractsingle(RESULT, self.stdout, 'verdict'), 'VALID')

    @performance_function('tokens/s/rank')
    def fom(self):
        return sn.extractsingle(RESULT, self.stdout, 'fom', float)
