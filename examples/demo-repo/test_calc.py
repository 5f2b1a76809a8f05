"""The demo's test, standard library only: `python3 -m unittest` in this folder."""

import unittest

from calc import average


class AverageTest(unittest.TestCase):
    def test_mean_of_three(self) -> None:
        self.assertEqual(average([1, 2, 3]), 2)

    def test_one_number_is_its_own_mean(self) -> None:
        self.assertEqual(average([5]), 5)


if __name__ == "__main__":
    unittest.main()
