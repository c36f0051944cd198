"""
Runs once, at the end of the very first server start: builds the demo world (Ada in Limbo).
"""


def at_initial_setup():
    from world.build import build_world

    build_world()
